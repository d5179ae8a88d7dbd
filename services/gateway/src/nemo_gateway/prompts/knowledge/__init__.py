"""Knowledge prompts: the grounded answer (:mod:`.answer`)."""
