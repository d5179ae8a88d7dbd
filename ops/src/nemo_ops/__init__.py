"""nemo_ops."""
