"""The ``nemo`` command line: help, usage errors, failures and a real run of the entry point."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from nemo_core.db import connect
from nemo_ops.cli import main
from nemo_ops.migrate import load_migrations
from nemo_testing.ports import free_port

DatabaseFactory = Callable[[], Awaitable[str]]

# The console script installed next to this interpreter: the real entry point.
NEMO = str(Path(sys.executable).with_name("nemo"))


async def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    inherited = {
        name: value
        for name, value in os.environ.items()
        if name not in ("DATABASE_URL", "DATABASE_URL_FILE")
    }
    process = await asyncio.create_subprocess_exec(
        NEMO,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**inherited, **(env or {})},
    )
    stdout, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


@pytest.mark.parametrize("argv", [["--help"], ["migrate", "--help"], ["seed", "--help"]])
def test_help_exits_zero(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: nemo" in out
    if argv == ["--help"]:
        assert "migrate" in out
        assert "seed" in out
    else:
        assert "--database-url" in out


@pytest.mark.parametrize(
    "argv", [[], ["unknown-command"], ["migrate", "--no-such-option"], ["seed", "extra"]]
)
def test_usage_errors_exit_two(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage: nemo" in capsys.readouterr().err


def test_missing_database_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(["migrate"])
    assert exit_info.value.code == 2
    assert "DATABASE_URL" in capsys.readouterr().err


def test_a_database_url_in_both_variables_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url_file = tmp_path / "url"
    url_file.write_text("postgresql://nemo@db/nemo", encoding="utf-8")
    monkeypatch.setenv("DATABASE_URL", "postgresql://nemo@db/nemo")
    monkeypatch.setenv("DATABASE_URL_FILE", str(url_file))
    with pytest.raises(SystemExit) as exit_info:
        main(["migrate"])
    assert exit_info.value.code == "nemo: set DATABASE_URL or DATABASE_URL_FILE, not both"


def test_unreachable_database_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"postgresql://nobody@/nowhere?host={tmp_path}"
    assert main(["migrate", "--database-url", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("nemo migrate: error: ")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["migrate", "--database-url", "postgresql://u:S3cretPw@db:notaport/nemo"],
        ["approvals", "list", "--database-url", "postgresql://u:S3cretPw@[::1/nemo"],
    ],
)
def test_a_malformed_database_url_fails_with_one_line_and_no_password(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"nemo {argv[0]}: error: ")
    assert len(err.strip().splitlines()) == 1
    assert "S3cretPw" not in err


def test_embedded_postgres_in_a_path_with_spaces_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ports = [
        *("--context-port", str(free_port()), "--gateway-port", str(free_port())),
        *("--toolplane-port", str(free_port()), "--mcp-port", str(free_port())),
    ]
    state_dir = str(tmp_path / "my project" / ".nemo")
    assert main(["dev", "up", "--state-dir", state_dir, *ports]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("nemo dev: error: embedded PostgreSQL cannot run in a path with")
    assert not any("Traceback" in line for line in err)


async def test_migrate_and_seed_through_the_entry_point(
    make_empty_database: DatabaseFactory, tmp_path: Path
) -> None:
    dsn = await make_empty_database()
    # As a Kubernetes Secret is mounted: a file, ending with a newline.
    url_file = tmp_path / "url"
    url_file.write_text(dsn + "\n", encoding="utf-8")

    code, out, err = await _run("migrate", env={"DATABASE_URL_FILE": str(url_file)})
    assert code == 0, err
    assert f"applied {len(load_migrations())} migration(s)" in out
    assert "nemo migrate: applying 0001_roles_and_schemas.sql" in err

    code, out, _ = await _run("migrate", env={"DATABASE_URL": dsn})
    assert code == 0
    assert out.startswith("nothing to apply")

    code, out, err = await _run("seed", "--database-url", dsn)
    assert code == 0, err
    assert out.startswith("seeded ")
    assert "nemo seed: loading" in err

    # A migration edited after it was applied stops the run with exit code 1.
    conn = await connect(dsn)
    try:
        await conn.execute(
            "UPDATE public.nemo_schema_migrations SET checksum = 'edited' WHERE version = 3"
        )
    finally:
        await conn.close()
    code, _, err = await _run("migrate", "--database-url", dsn)
    assert code == 1
    assert "0003_learning_tables.sql was changed" in err


async def test_seed_before_migrate_fails(make_empty_database: DatabaseFactory) -> None:
    dsn = await make_empty_database()
    code, _, err = await _run("seed", "--database-url", dsn)
    assert code == 1
    assert "run `nemo migrate` first" in err


def test_oauth_token_without_a_stack_says_to_start_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dev", "oauth-token", "--user", "U-2041-P1", "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "nemo dev: error: no --issuer: pass it, or start the stack (`make run`) so "
        "dev.env names NEMO_OAUTH_ISSUER"
    ]


def test_oauth_token_needs_a_user(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["dev", "oauth-token"])
    assert usage.value.code == 2
    assert "--user" in capsys.readouterr().err


def test_oauth_token_with_no_server_at_the_issuer_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    issuer = f"http://127.0.0.1:{free_port()}"
    args = ["--user", "U-2041-P1", "--issuer", issuer, "--client", "c", "--resource", "http://r"]
    assert main(["dev", "oauth-token", "--state-dir", str(tmp_path), *args]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"nemo dev: error: the authorization server at {issuer} does not answer")


def test_dev_up_without_npm_says_so_before_it_starts_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no npm there, nor anywhere else
    monkeypatch.setenv("NEMO_NODE_TOOLS_CACHE", str(tmp_path / "node-tools"))  # nothing installed
    state_dir = tmp_path / "state"
    ports = [
        *("--context-port", str(free_port()), "--gateway-port", str(free_port())),
        *("--toolplane-port", str(free_port()), "--mcp-port", str(free_port())),
        *("--oauth-port", str(free_port())),
    ]
    assert main(["dev", "up", "--state-dir", str(state_dir), *ports]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("nemo dev: error: `nemo dev up` runs a local authorization server")
    assert "npm is not on PATH" in line
    assert "apt-get install npm" in line
    assert not (state_dir / "pgdata").exists()
