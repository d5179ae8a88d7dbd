"""The prompt registry (``registry``), what a prompt is (``spec``), shared wording and checks
(``common``, ``tags``, ``score_claims``), the field-by-field proto conversion (``proto_mirror``)
and one package per prompt family with one module per prompt (``learner/tutor_hint.py`` holds
``learner.tutor_hint``)."""
