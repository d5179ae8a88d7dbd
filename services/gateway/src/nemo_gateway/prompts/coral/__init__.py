"""Content-only prompts: generating practice items (:mod:`.generate_items`) and reviewing them
(:mod:`.evaluate_item`).

These prompts may see no learner data. Their variables name curriculum content only (topic,
subject, grade, item text) and refuse anything else; they have no purpose, so the gateway never
builds a learner context for them and refuses a request that names a learner.

A generated item's answer key and rubric are kept in the typed result on the server, where the
guardrail checks them (a multiple-choice key must be one of the choices), and stored with the
item in the knowledge item bank (through the context service) so answers to it can be graded;
what a client receives has neither, only the item ids.
"""
