"""nemo_toolplane."""
