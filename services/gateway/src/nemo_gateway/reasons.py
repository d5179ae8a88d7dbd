"""How a run ended: its path and its reason, the vocabulary every layer of the gateway names."""

from __future__ import annotations

from enum import StrEnum


class RunPath(StrEnum):
    """How a run reached its result: the run record's ``RunPath`` (by member name), plus the one
    ending of a streamed reply that no run record carries."""

    MODEL = "MODEL"
    REPAIRED = "REPAIRED"
    FALLBACK = "FALLBACK"
    PARTIAL = "PARTIAL"
    """A streamed reply that broke off after the learner saw part of it: the stream ends with an
    error and the path reaches telemetry only."""


class RunReason(StrEnum):
    """Run record reasons (``RunRecord.reason``), not ErrorInfo reasons; a clean MODEL run has
    none. A provider failure's reason is its ``ProviderFailure.code``."""

    BRACE_SLICE = "BRACE_SLICE"
    BACKSLASH_REPAIR = "BACKSLASH_REPAIR"
    REASKED = "REASKED"
    GUARDRAIL_REJECTED = "GUARDRAIL_REJECTED"
    GUARDRAIL_ERROR = "GUARDRAIL_ERROR"
    TRUNCATED = "TRUNCATED"
    ATTEMPTS_EXHAUSTED = "ATTEMPTS_EXHAUSTED"
    CITATION_CHECK_FAILED = "CITATION_CHECK_FAILED"
    KILL_SWITCH = "KILL_SWITCH"
    BASELINE_PROVIDER = "BASELINE_PROVIDER"
    NO_SOURCES = "NO_SOURCES"
    INPUT_TOO_LONG = "INPUT_TOO_LONG"
    ANSWER_TOO_LONG = "ANSWER_TOO_LONG"
    """A streamed reply that ran past its bound in characters, deltas or tokens."""
    REASK_TOO_LONG = "REASK_TOO_LONG"
    """A re-ask that would carry the prompt past its input limit (the first ask fitted)."""
    WRONG_LANGUAGE = "WRONG_LANGUAGE"
    """Answers kept coming in another language than the prompt declares."""
    EMPTY_REPLY = "EMPTY_REPLY"
    """A streamed reply that ended before the learner saw any of it."""
