"""The patterns of grants, policies and call limits: comma-separated exact values and globs.

``learner.*, docs.search`` matches ``learner.get_profile`` and ``docs.search``; blank items match
nothing. Only the matching lives here; what a pattern is matched against (a tool's bare name or
its versioned id, an agent, a resource, an environment) is the caller's.
"""

from __future__ import annotations

from fnmatch import fnmatchcase


def matches_pattern(pattern: str, value: str) -> bool:
    """Whether ``value`` matches a comma-separated list of exact values and globs."""
    return any(
        item and fnmatchcase(value, item) for item in (part.strip() for part in pattern.split(","))
    )
