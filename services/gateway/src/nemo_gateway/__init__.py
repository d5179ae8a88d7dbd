"""nemo_gateway."""
