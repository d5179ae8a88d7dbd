"""The rendered overlays pass checkov's Kubernetes checks (the scanner a platform team runs on
manifests), with no exception: images by digest, secrets as files, the restricted pod security
settings, probes, limits.

checkov lives in an environment of its own (deploy/scan, installed by `make install`), because it
pins versions the services cannot use; it runs offline (no downloads, no update check)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.deploy_manifests import OVERLAYS, RENDERERS, REPO, rendered

CHECKOV = REPO / "deploy" / "scan" / ".venv" / "bin" / "checkov"
#: checkov's Kubernetes checks that every overlay runs: far fewer would mean it scanned nothing.
LEAST_CHECKS = 300


def _scan(directory: Path) -> dict[str, dict[str, Any]]:
    """checkov's report of every YAML file in ``directory``, by file name."""
    if not CHECKOV.exists():
        pytest.fail("checkov is not installed: run `make install` (deploy/scan)")
    completed = subprocess.run(
        [str(CHECKOV), "--directory", str(directory), "--framework", "kubernetes",
         "--output", "json", "--compact", "--skip-download"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "true"},
    )  # fmt: skip
    # Exit code 1 means failed checks, which the report lists; anything else is a crash.
    assert completed.returncode in (0, 1), completed.stderr
    report = json.loads(completed.stdout)
    by_file: dict[str, dict[str, Any]] = {}
    for outcome in ("passed", "failed"):
        for check in report["results"][f"{outcome}_checks"]:
            entry = by_file.setdefault(Path(check["file_path"]).name, {"passed": 0, "failed": []})
            if outcome == "passed":
                entry["passed"] += 1
            else:
                entry["failed"].append(f"{check['check_id']} {check['resource']}")
    return by_file


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """One scan of every overlay as every renderer renders it (checkov starts slowly)."""
    directory = tmp_path_factory.mktemp("rendered")
    for renderer in RENDERERS:
        for overlay in OVERLAYS:
            (directory / f"{overlay}-{renderer}.yaml").write_text(
                yaml.safe_dump_all(rendered(renderer, overlay)), encoding="utf-8"
            )
    return _scan(directory)


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_every_overlay_passes_every_kubernetes_check(
    reports: dict[str, dict[str, Any]], overlay: str, renderer: str
) -> None:
    report = reports[f"{overlay}-{renderer}.yaml"]
    assert report["failed"] == []
    assert report["passed"] >= LEAST_CHECKS
