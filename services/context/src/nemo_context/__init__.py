"""nemo_context."""
