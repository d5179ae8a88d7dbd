"""This project's documentation as the docs tools see it: the corpus of H2 sections
(:mod:`.corpus`) and its search and reading (:mod:`.library`)."""
