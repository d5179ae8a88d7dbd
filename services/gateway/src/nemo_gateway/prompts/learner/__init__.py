"""Learner prompts: a hint (:mod:`.tutor_hint`), a plan explanation (:mod:`.plan_explanation`)
and a portrait summary (:mod:`.portrait_summary`).

Each runs on the bundle the context service builds for its purpose: the bundle's rendered text
(pseudonymous, gated) goes into the prompt, and the baselines read the bundle's typed fields.
Mastery, confidence, states and the plan's order are the server's: the model only writes words
around them, and a text that states a score is rejected. What the three share is in
:mod:`.shared`.
"""
