"""The operations docs stay true: every page a platform engineer needs exists in the shape the
docs search indexes (front matter with a title, H2 sections), and every command, variable,
RPC, file and link a page names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf import descriptor_pool

from nemo_context.rights.retention import render_table
from nemo_protos.context.v1 import (
    context_service_pb2,  # noqa: F401  (registers the descriptors)
    rights_service_pb2,  # noqa: F401
)
from nemo_protos.gateway.v1 import gateway_service_pb2  # noqa: F401
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2, toolplane_service_pb2  # noqa: F401
from tests.deploy.deploy_manifests import REPO
from tests.docs.docs_text import (
    INLINE_CODE,
    NEMO_COMMAND,
    VARIABLE,
    code,
    nemo_subcommands,
    variable_known,
)

OPERATIONS = REPO / "docs" / "operations"

#: The topics the operations docs must cover, by page.
PAGES = {
    "deploy.md": "Deploy on Kubernetes",
    "providers.md": "Configure a model provider",
    "pseudonym-key.md": "Rotate the pseudonym key",
    "identifier-key.md": "Register and rotate the identifier key",
    "agent-tokens.md": "Issue and revoke agent tokens",
    "approvals.md": "Approve tool calls",
    "snapshots.md": "Snapshot retention and purge",
    "audit-log.md": "Read the audit log",
    "scaling.md": "Scale each service",
    "evaluation.md": "Evaluate the prompts against a model",
    "oauth.md": "Sign people in with OAuth",
    "learner-rights.md": "Handle a family's data rights requests",
    "console.md": "Run the console",
}

_FRONT_MATTER = re.compile(r"\A---\ntitle: (?P<title>[^\n]+)\n---\n\n# (?P<heading>[^\n]+)\n")
_OPS_IMAGE_COMMAND = re.compile(r"/ops:\S+ ([a-z][a-z-]*)")
_RPC = re.compile(r"\b(nemo\.[a-z]+\.v1\.[A-Za-z]+)/([A-Za-z]+)\b")
_REPO_PATH = re.compile(
    r"^(?:deploy|docs|services|ops|libs|eval|tests|protos|benchmarks)/[A-Za-z0-9_./-]*[A-Za-z0-9_]$"
)
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")

pages = pytest.mark.parametrize("page", sorted(PAGES))


def _text(page: str) -> str:
    return (OPERATIONS / page).read_text(encoding="utf-8")


def test_every_topic_has_its_page() -> None:
    assert sorted(p.name for p in OPERATIONS.glob("*.md")) == sorted(PAGES)


@pages
def test_pages_have_a_title_and_sections(page: str) -> None:
    text = _text(page)
    match = _FRONT_MATTER.match(text)
    assert match is not None, "front matter with title:, then the H1"
    assert match["title"] == match["heading"] == PAGES[page]
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert len(sections) >= 3
    for section in sections:
        heading, _, body = section.partition("\n")
        assert body.strip(), f"section {heading!r} is empty"


@pages
def test_named_commands_exist(page: str) -> None:
    commands = nemo_subcommands()
    named = {
        match
        for line in code(_text(page))
        for pattern in (NEMO_COMMAND, _OPS_IMAGE_COMMAND)
        for match in pattern.findall(line)
    }
    assert named - commands == set()


def test_the_command_check_sees_commands() -> None:
    named = {m for line in code(_text("approvals.md")) for m in NEMO_COMMAND.findall(line)}
    assert "approvals" in named


@pages
def test_named_variables_exist(page: str) -> None:
    assert not [name for name in set(VARIABLE.findall(_text(page))) if not variable_known(name)]


@pages
def test_named_rpcs_exist(page: str) -> None:
    pool = descriptor_pool.Default()
    for service, method in _RPC.findall(_text(page)):
        assert pool.FindServiceByName(service).FindMethodByName(method) is not None, method


@pages
def test_named_files_and_links_exist(page: str) -> None:
    text = _text(page)
    paths = [
        token
        for token in INLINE_CODE.findall(text) + re.findall(r"file://(\S+)", text)
        if _REPO_PATH.match(token)
    ]
    missing = [path for path in paths if not (REPO / path).exists()]
    links = [link for link in _LINK.findall(text) if not link.startswith("http")]
    missing += [link for link in links if not (OPERATIONS / link).resolve().exists()]
    assert missing == []


@pages
def test_pages_name_no_local_machine_paths(page: str) -> None:
    assert not re.search(r"(/home/|/Users/|/work/|/tmp/|C:\\)", _text(page))


def test_the_readme_points_to_the_operations_docs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "](docs/operations/deploy.md)" in readme
    assert Path(REPO / "docs/operations/deploy.md").exists()


def test_the_retention_table_shown_is_the_one_enforced() -> None:
    text = _text("learner-rights.md")
    shown = text.split("<!-- retention:begin -->\n", 1)[1].split("\n<!-- retention:end -->", 1)[0]
    assert shown == render_table()
