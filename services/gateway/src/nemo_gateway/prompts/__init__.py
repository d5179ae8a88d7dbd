"""The prompt registry (``registry``), what a prompt is (``spec``), shared wording and checks
(``common``) and one module per prompt family."""
