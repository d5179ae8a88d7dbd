"""Tool plane registry: applications, the three demo agents, their grants and the policies, and
the OAuth client of the local authorization server.

No agent token is seeded: tokens are issued by an operator command, which prints them once.
"""

from __future__ import annotations

from nemo_devtools.oauth_server import DEV_CLIENT_ID
from nemo_ops.seed_data.base import TableData, at

# The platform is a monorepo, so most applications share a repository and differ by path.
_MONOREPO = "nemo12/platform"

# The table below is laid out as a table; the formatter would put every field on its own line.
# fmt: off

# (id, name, domain, repository, repository_path, owner, description, architecture reference,
#  database, deployment target, metadata)
_APPLICATIONS: tuple[
    tuple[str, str, str, str, str, str, str, str, str | None, str, dict[str, object]], ...
] = (
    ("nemo12-web", "Nemo12 Web", "frontend", _MONOREPO, "apps/web", "team-web",
     "Public website and parent portal: sign-up, family management, reports.",
     "docs/architecture/web.md", None, "cloudflare-pages",
     {"framework": "nextjs", "url": "https://nemo12.com"}),
    ("nemo12-api", "Nemo12 API", "platform", _MONOREPO, "workers/api", "team-platform",
     "Core API: accounts, families, learners, permissions, learning engines.",
     "docs/architecture/api.md", "nemo12-platform", "cloudflare-workers",
     {"runtime": "workers", "url": "https://api.nemo12.com"}),
    ("nemo12-learn", "Nemo12 Learn", "learning", _MONOREPO, "apps/learn", "team-learning",
     "Learner app: practice sessions, learning plan, tutoring chat.",
     "docs/architecture/learn.md", None, "cloudflare-pages",
     {"framework": "nextjs", "url": "https://learn.nemo12.com"}),
    ("nemo12-coral", "Nemo12 Coral", "knowledge", _MONOREPO, "workers/coral", "team-knowledge",
     "Knowledge graph and item bank: nodes, edges, items, generation and review.",
     "docs/architecture/coral.md", "nemo12-platform", "cloudflare-workers",
     {"runtime": "workers"}),
    ("nemo12-foundry", "Nemo12 Foundry", "ai", _MONOREPO, "workers/foundry", "team-ai",
     "Background engines and workflows: readiness, learning plans, content pipelines.",
     "docs/architecture/foundry.md", "nemo12-platform", "cloudflare-workers",
     {"runtime": "workers", "public": False}),
    ("nemo12-tool-plane", "Nemo12 Tool Plane", "agents", "nemo12/ai-plane", "services/toolplane",
     "team-ai", "Capability layer for AI agents: MCP edge, grants, policies, approvals, audit.",
     "docs/architecture/tool-plane.md", "nemo-ai-plane", "kubernetes",
     {"runtime": "python", "protocols": ["mcp", "grpc"]}),
)

# fmt: on

APPLICATIONS = TableData(
    "toolplane.applications",
    ("id",),
    tuple(
        {
            "id": app_id,
            "name": name,
            "domain": domain,
            "repository": repository,
            "repository_path": path,
            "environment": "production",
            "owner": owner,
            "status": "active",
            "description": description,
            "architecture_reference": reference,
            "database": database,
            "deployment_target": target,
            "metadata": metadata,
            "created_at": at(days=-365),
            "updated_at": at(days=-30),
        }
        for (
            app_id,
            name,
            domain,
            repository,
            path,
            owner,
            description,
            reference,
            database,
            target,
            metadata,
        ) in _APPLICATIONS
    ),
)

AGENTS = TableData(
    "toolplane.agents",
    ("id",),
    (
        {
            "id": "learning-agent",
            "name": "Learning agent",
            "description": "Helps a parent, mentor or learner understand a child's learning.",
            "status": "active",
        },
        {
            "id": "research-agent",
            "name": "Research agent",
            "description": "Answers curriculum questions from the knowledge graph and the docs.",
            "status": "active",
        },
        {
            "id": "engineering-agent",
            "name": "Engineering agent",
            "description": "Reasons about the platform's applications and operates their status.",
            "status": "active",
        },
    ),
)

_LEARNER_READ_TOOLS = (
    "learner.get_profile",
    "learner.get_context",
    "learner.get_learning_progress",
    "learner.get_competency_profile",
    "assessment.*",
    "learning.*",
    "nemo12.get_learner_learning_state",
)
_KNOWLEDGE_TOOLS = ("coral.search_knowledge", "coral.get_knowledge_node")
_DOCS_TOOLS = ("docs.search_docs", "docs.get_doc")
_APPLICATION_READ_TOOLS = (
    "application.list",
    "application.get",
    "application.get_repository",
    "application.get_environment",
)

# (agent, tool pattern, resource scope, permission); every grant covers all environments.
_GRANTS: tuple[tuple[str, str, str, str], ...] = (
    *(("learning-agent", tool, "user", "read") for tool in _LEARNER_READ_TOOLS),
    *(("learning-agent", tool, "*", "read") for tool in _KNOWLEDGE_TOOLS + _DOCS_TOOLS),
    *(("research-agent", tool, "*", "read") for tool in _KNOWLEDGE_TOOLS + _DOCS_TOOLS),
    *(("engineering-agent", tool, "*", "read") for tool in _APPLICATION_READ_TOOLS + _DOCS_TOOLS),
    # The one write grant: status changes are HIGH risk and so need a person's approval.
    ("engineering-agent", "application.set_status", "*", "write"),
)

GRANTS = TableData(
    "toolplane.grants",
    ("agent_id", "tool_pattern", "resource_scope", "environment_scope"),
    tuple(
        {
            "agent_id": agent,
            "tool_pattern": tool,
            "resource_scope": scope,
            "environment_scope": "*",
            "permission": permission,
            "created_at": at(days=-90),
        }
        for agent, tool, scope, permission in _GRANTS
    ),
)

POLICIES = TableData(
    "toolplane.policies",
    ("name",),
    (
        {
            "name": "deny-learner-writes",
            "description": "No agent changes learner records; people edit them in the app.",
            "effect": "deny",
            "agent_scope": "*",
            "tool_scope": "learner.update_*",
            "resource_scope": "*",
            "environment_scope": "*",
            "conditions": None,
            "priority": 10,
            "enabled": True,
            "created_at": at(days=-90),
        },
        {
            "name": "approve-high-risk-writes",
            "description": "A write at HIGH risk or above waits for a person's approval.",
            "effect": "require_approval",
            "agent_scope": "*",
            "tool_scope": "*",
            "resource_scope": "*",
            "environment_scope": "*",
            "conditions": '{"risk_at_least": "HIGH", "mode": "write"}',
            "priority": 20,
            "enabled": True,
            "created_at": at(days=-90),
        },
        {
            "name": "approve-production-writes",
            "description": "Any write in production waits for a person's approval.",
            "effect": "require_approval",
            "agent_scope": "*",
            "tool_scope": "*",
            "resource_scope": "*",
            "environment_scope": "production",
            "conditions": '{"mode": "write"}',
            "priority": 30,
            "enabled": True,
            "created_at": at(days=-90),
        },
    ),
)

OAUTH_CLIENTS = TableData(
    "toolplane.oauth_clients",
    ("client_id",),
    (
        {
            # The local authorization server's development client (`nemo dev oauth-token` and the
            # tests sign people in with it) acts as the learning agent.
            "client_id": DEV_CLIENT_ID,
            "agent_id": "learning-agent",
            "label": "local authorization server (development)",
            "created_at": at(days=-30),
        },
    ),
)

TABLES = (APPLICATIONS, AGENTS, GRANTS, POLICIES, OAUTH_CLIENTS)
