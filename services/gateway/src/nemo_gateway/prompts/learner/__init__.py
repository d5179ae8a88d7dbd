"""Learner prompts, one module each (``MODULES`` in :mod:`nemo_gateway.prompts.registry` lists
them): texts for a learner or about one, such as a hint or a plan explanation.

Each runs on the bundle the context service builds for its purpose: the bundle's rendered text
(pseudonymous, gated) goes into the prompt, and the baselines read the bundle's typed fields,
only of the slices the purpose declares (``tests/contracts/test_registrations.py``). Mastery,
confidence, states and the plan's order are the server's: the model only writes words around
them, and a text that states a score is rejected. What they share is in :mod:`.shared`.
"""
