"""Only the gateway's provider module talks to a model endpoint or reads a model key.

Every Python source of the tree is searched for model-endpoint usage (the chat completions and
messages paths, public model API hosts, model SDK imports) and for model key settings. The tool
plane legitimately runs an HTTP server and client for its MCP edge, so HTTP libraries as such are
not the signal; model endpoints and keys are. The allow-list says who may, and why.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROVIDER_MODULE = "services/gateway/src/nemo_gateway/providers/"

MODEL_ENDPOINTS = re.compile(
    r"/chat/completions|/v1/messages|/v1/completions|/v1/embeddings|/embeddings\b"
    r"|/api/chat\b|/api/generate\b"
    r"|api\.openai\.com|api\.anthropic\.com|integrate\.api\.nvidia\.com"
    r"|generativelanguage\.googleapis\.com"
)
MODEL_SDKS = re.compile(
    r"^\s*(?:import|from)\s+(?:openai|anthropic|litellm|langchain_openai|langchain_anthropic"
    r"|mistralai|cohere|google\.generativeai)\b",
    re.M,
)
MODEL_KEYS = re.compile(
    r"llm_api_key|embedding_api_key|LLM_API_KEY|EMBEDDING_API_KEY|OPENAI_API_KEY"
    r"|ANTHROPIC_API_KEY|NVIDIA_API_KEY"
)

# Where a model endpoint is configured: reading it means building requests to a model.
MODEL_BASE_URLS = re.compile(r"llm_base_url|embedding_base_url|LLM_BASE_URL|EMBEDDING_BASE_URL")

# path prefix -> (what it may contain, why)
ALLOWED: dict[str, tuple[frozenset[str], str]] = {
    PROVIDER_MODULE: (
        frozenset({"endpoint", "sdk", "key", "base_url"}),
        "the provider module: the one place that calls models with their keys",
    ),
    "services/gateway/src/nemo_gateway/settings.py": (
        frozenset({"key", "endpoint", "base_url"}),
        "declares the key settings and documents the base URLs; only the provider module "
        "reads them",
    ),
    "services/gateway/tests/": (
        frozenset({"key", "base_url"}),
        "configures the gateway under test with a test key for the scripted provider",
    ),
    "tests/stack.py": (
        frozenset({"base_url"}),
        "points the gateway process under test at the scripted provider",
    ),
    "ops/src/nemo_ops/dev.py": (
        frozenset({"base_url"}),
        "points the gateway it starts at the local model server it starts with it",
    ),
    "benchmarks/gateway.py": (
        frozenset({"base_url"}),
        "points the gateway under benchmark at the instant provider",
    ),
    "tests/deploy/": (
        frozenset({"key", "base_url"}),
        "checks that only the gateway's manifests mount the model keys, and where the rendered "
        "settings point the gateway",
    ),
    "eval/tests/": (
        frozenset({"key"}),
        "checks that the key settings never reach an evaluation report",
    ),
    "eval/src/nemo_eval/stack.py": (
        frozenset({"base_url"}),
        "points the gateway under evaluation at the recording proxy in front of the provider",
    ),
    "libs/nemo-testing/src/nemo_testing/providers.py": (
        frozenset({"endpoint"}),
        "the scripted provider server: it serves the wire formats, it calls no model",
    ),
}
SEARCHED = ("libs", "services", "ops", "eval", "benchmarks", "tests", "local-model", "conftest.py")
SKIPPED_PARTS = frozenset({"__pycache__", ".venv", "node_modules"})
GENERATED = "libs/nemo-protos/src/nemo_protos/"


def _sources() -> list[Path]:
    files: list[Path] = []
    for top in SEARCHED:
        path = ROOT / top
        candidates = [path] if path.is_file() else path.rglob("*.py")
        for file in candidates:
            relative = file.relative_to(ROOT).as_posix()
            if SKIPPED_PARTS & set(file.parts) or relative.startswith(GENERATED):
                continue
            files.append(file)
    return files


def _findings(text: str) -> set[str]:
    found = set()
    if MODEL_ENDPOINTS.search(text):
        found.add("endpoint")
    if MODEL_SDKS.search(text):
        found.add("sdk")
    if MODEL_KEYS.search(text):
        found.add("key")
    if MODEL_BASE_URLS.search(text):
        found.add("base_url")
    return found


def _allowed(relative: str) -> frozenset[str]:
    kinds: frozenset[str] = frozenset()
    for prefix, (allowed, _) in ALLOWED.items():
        if relative == prefix or (prefix.endswith("/") and relative.startswith(prefix)):
            kinds |= allowed
    return kinds


def test_no_module_outside_the_provider_module_calls_a_model_or_reads_a_model_key() -> None:
    this_file = Path(__file__).resolve()
    violations = []
    for file in _sources():
        if file.resolve() == this_file:
            continue  # it spells out the patterns
        relative = file.relative_to(ROOT).as_posix()
        extra = _findings(file.read_text(encoding="utf-8")) - _allowed(relative)
        if extra:
            violations.append(f"{relative}: {sorted(extra)}")
    assert not violations, "model calls or keys outside the provider module:\n" + "\n".join(
        violations
    )


def test_the_search_would_notice_model_calls() -> None:
    # The provider module really matches the patterns, so the search above is not vacuous.
    found = set()
    for file in (ROOT / PROVIDER_MODULE).rglob("*.py"):
        found |= _findings(file.read_text(encoding="utf-8"))
    assert {"endpoint", "key"} <= found
    assert _findings("from openai import AsyncOpenAI") == {"sdk"}
    assert _findings('httpx.post(f"{base}/api/chat")') == {"endpoint"}
    assert _findings("url = settings.llm_base_url") == {"base_url"}
    for prefix in ALLOWED:
        assert (ROOT / prefix).exists(), f"stale allow-list entry {prefix}"
