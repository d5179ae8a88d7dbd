"""The tools, one module per domain; :func:`build_registry` gathers them.

Adding a tool is adding it to its domain's ``TOOLS`` (and a grant for the agents that need it);
a new domain is a new module listed in :data:`DOMAINS`.
"""

from __future__ import annotations

from nemo_toolplane.registry import Registry
from nemo_toolplane.tools import application, assessment, coral, docs, learner, learning, nemo12

DOMAINS = (learner, assessment, learning, coral, application, nemo12, docs)


def build_registry() -> Registry:
    return Registry(tool for domain in DOMAINS for tool in domain.TOOLS)
