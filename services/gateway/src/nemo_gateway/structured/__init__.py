"""Model text to validated output: JSON extraction, LaTeX escape check, the run pipeline."""
