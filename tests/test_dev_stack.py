"""`nemo dev up` (what `make run` runs): the whole stack comes up, answers, and stops cleanly.

The stack runs as a separate process tree exactly as a developer starts it, on free ports and a
temporary state directory, with embedded PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio
import httpx
import psutil
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from joserfc import jwt
from joserfc.jwk import KeySet

from nemo_core.errors import error_details
from nemo_ops.cli import main
from nemo_ops.embedded_pg import start_embedded_postgres
from nemo_protos.context.v1 import context_service_pb2, context_service_pb2_grpc
from nemo_protos.gateway.v1 import gateway_service_pb2, gateway_service_pb2_grpc
from nemo_testing.ports import free_port

NEMO = str(Path(sys.executable).with_name("nemo"))
STARTUP_SECONDS = 120
STOP_SECONDS = 10
#: A prompt's deadline on the local model, on two shared cores.
LOCAL_MODEL_SECONDS = 120

REQUIRED_VARIABLES = (
    "DATABASE_URL",
    "NEMO_CONTEXT_ADDR",
    "NEMO_GATEWAY_ADDR",
    "NEMO_TOOLPLANE_ADDR",
    "NEMO_MCP_URL",
    "NEMO_CONSOLE_URL",
    "NEMO_OAUTH_ISSUER",
    "NEMO_DEV_OAUTH_CLIENT_ID",
    "NEMO_CALLER_TOKEN_METADATA_KEY",
    "NEMO_DEV_TOKEN_LEARNING_AGENT",
    "NEMO_DEV_TOKEN_RESEARCH_AGENT",
    "NEMO_DEV_TOKEN_ENGINEERING_AGENT",
    "NEMO_DEV_CALLER_TOKEN_GATEWAY",
    "NEMO_DEV_CALLER_TOKEN_TOOLPLANE",
    "NEMO_DEV_CALLER_TOKEN_INTERNAL",
    "NEMO_DEV_CALLER_TOKEN_PLATFORM",
    "NEMO_DEV_CALLER_TOKEN_OPERATOR",
    "NEMO_DEV_CALLER_TOKEN_AUDIT",
    "NEMO_DEV_CALLER_TOKEN_CONSOLE",
    "NEMO_CONTEXT_SNAPSHOT_DIR",
    "NEMO_CONTEXT_PSEUDONYM_KEY_FILE",
    "NEMO_CONTEXT_SNAPSHOT_MASTER_KEY_FILE",
    "NEMO_OPERATOR_TOKEN",
)

SERVICE_RPCS = {
    "NEMO_CONTEXT_ADDR": {
        "nemo.context.v1.ContextService": {
            "BuildContext",
            "BuildConversationContext",
            "RecordTurn",
            "CheckLearnerAccess",
            "CheckUser",
            "SearchKnowledge",
            "GetKnowledgeNode",
            "GetSnapshot",
            "ListLinkedLearners",
            "ResolveLearnerRef",
            "ListPurposes",
            "StoreGeneratedItems",
        }
    },
    "NEMO_GATEWAY_ADDR": {
        "nemo.gateway.v1.GatewayService": {"RunPrompt", "StreamPrompt", "Answer", "ListPrompts"}
    },
    "NEMO_TOOLPLANE_ADDR": {
        "nemo.toolplane.v1.ToolPlaneService": {"ListTools", "CallTool"},
        "nemo.toolplane.v1.ToolPlaneAdminService": {
            "IssueAgentToken",
            "RevokeAgentToken",
            "ListApprovals",
            "DecideApproval",
            "ListAuditEntries",
            "GetPerson",
            "ListAgents",
            "CreateGrant",
            "DeleteGrant",
            "ListPolicies",
            "ListLinkedLearners",
            "ListLearnerActivity",
            "ListLearnerApprovals",
            "ListAuthorizations",
            "RevokeAuthorization",
        },
    },
}


@dataclass
class DevStack:
    process: subprocess.Popen[str]
    env: dict[str, str]
    state_dir: Path
    output: Path


def _read_env(path: Path) -> dict[str, str]:
    """dev.env as a shell reads it (values are shell-quoted)."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key: shlex.split(value)[0] if value else "" for key, value in pairs}


def _args(state_dir: Path, ports: list[str]) -> list[str]:
    return [
        *(NEMO, "dev", "up", "--state-dir", str(state_dir)),
        *("--context-port", ports[0], "--gateway-port", ports[1]),
        *("--toolplane-port", ports[2], "--mcp-port", ports[3], "--oauth-port", ports[4]),
        *("--console-port", ports[5]),
    ]


def _environment(database_url: str | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return env


def _struct(**values: str) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


def _written_at(path: Path) -> int | None:
    return path.stat().st_mtime_ns if path.exists() else None


def _start(
    state_dir: Path, *, database_url: str | None = None, local_model: bool = False
) -> DevStack:
    ports = [str(free_port()) for _ in range(6)]
    env = _environment(database_url)
    args = _args(state_dir, ports)
    if local_model:
        env["NEMO_GATEWAY_PROVIDER"] = "local"
        args += ["--local-model-port", str(free_port())]
    env_file = state_dir / "dev.env"
    # dev.env is written once the stack serves; a previous run's copy stays until then.
    previous = _written_at(env_file)
    output = state_dir.parent / f"{state_dir.name}-{time.monotonic_ns()}.out"
    with output.open("w") as sink:
        process = subprocess.Popen(
            args,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    deadline = time.monotonic() + STARTUP_SECONDS
    while _written_at(env_file) in {None, previous}:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"dev stack did not come up:\n{output.read_text()}")
        time.sleep(0.2)
    return DevStack(process, _read_env(env_file), state_dir, output)


def _stop(stack: DevStack) -> list[psutil.Process]:
    """Ctrl-C the stack; returns the processes it had started."""
    children = psutil.Process(stack.process.pid).children(recursive=True)
    assert children, "the stack started no processes"
    stack.process.send_signal(signal.SIGINT)
    stack.process.wait(timeout=STOP_SECONDS)
    return children


@pytest.fixture(scope="module")
def dev_state_dir(fast_scratch_dir: Path) -> Path:
    return fast_scratch_dir / "dev-stack"


@pytest.fixture(scope="module")
def dev_stack(dev_state_dir: Path) -> Iterator[DevStack]:
    stack = _start(dev_state_dir)
    try:
        yield stack
    finally:
        if stack.process.poll() is None:
            stack.process.kill()
            stack.process.wait()


def test_dev_env_has_every_variable(dev_stack: DevStack) -> None:
    missing = [name for name in REQUIRED_VARIABLES if not dev_stack.env.get(name)]
    assert not missing
    assert (dev_stack.state_dir / "dev.env").stat().st_mode & 0o077 == 0, "dev.env holds secrets"


async def test_every_service_is_serving(dev_stack: DevStack) -> None:
    for variable in ("NEMO_CONTEXT_ADDR", "NEMO_GATEWAY_ADDR", "NEMO_TOOLPLANE_ADDR"):
        async with grpc.aio.insecure_channel(dev_stack.env[variable]) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
    mcp_health = dev_stack.env["NEMO_MCP_URL"].removesuffix("/mcp") + "/health"
    issuer = dev_stack.env["NEMO_OAUTH_ISSUER"]
    async with httpx.AsyncClient() as client:
        assert (await client.get(mcp_health)).status_code == 200
        discovery = await client.get(f"{issuer}/.well-known/openid-configuration")
        assert discovery.json()["issuer"] == issuer
        # The console answers, and sends whoever is not signed in to sign in.
        console = dev_stack.env["NEMO_CONSOLE_URL"]
        assert (await client.get(f"{console}/healthz")).status_code == 200
        signing_in = await client.get(f"{console}/signin")
        assert signing_in.status_code == 303
        assert signing_in.headers["location"].startswith(f"{issuer}/auth?")


@pytest.mark.parametrize("variable", sorted(SERVICE_RPCS))
def test_reflection_lists_each_services_rpcs(dev_stack: DevStack, variable: str) -> None:
    with grpc.insecure_channel(dev_stack.env[variable]) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = set(database.get_services())
        for service, methods in SERVICE_RPCS[variable].items():
            assert service in services
            descriptor = database.FindFileContainingSymbol(service)
            (proto_service,) = [
                s for s in descriptor.service if f"{descriptor.package}.{s.name}" == service
            ]
            assert {method.name for method in proto_service.method} == methods
        assert "grpc.health.v1.Health" in services


async def test_callers_are_authenticated_and_checked(dev_stack: DevStack) -> None:
    key = dev_stack.env["NEMO_CALLER_TOKEN_METADATA_KEY"]
    request = context_service_pb2.ListPurposesRequest()
    async with grpc.aio.insecure_channel(dev_stack.env["NEMO_CONTEXT_ADDR"]) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as no_token:
            await stub.ListPurposes(request, timeout=5)
        assert error_details(no_token.value).reason == "CALLER_UNAUTHENTICATED"
        assert no_token.value.code() is grpc.StatusCode.UNAUTHENTICATED

        # The context service knows only its own callers' tokens.
        internal = ((key, dev_stack.env["NEMO_DEV_CALLER_TOKEN_INTERNAL"]),)
        with pytest.raises(grpc.aio.AioRpcError) as foreign_token:
            await stub.ListPurposes(request, timeout=5, metadata=internal)
        assert foreign_token.value.code() is grpc.StatusCode.UNAUTHENTICATED

        audit = ((key, dev_stack.env["NEMO_DEV_CALLER_TOKEN_AUDIT"]),)
        with pytest.raises(grpc.aio.AioRpcError) as outside_acl:
            await stub.CheckLearnerAccess(
                context_service_pb2.CheckLearnerAccessRequest(), timeout=5, metadata=audit
            )
        assert outside_acl.value.code() is grpc.StatusCode.PERMISSION_DENIED
        details = error_details(outside_acl.value)
        assert (details.reason, details.domain) == ("CALLER_NOT_ALLOWED", "context")

        gateway = ((key, dev_stack.env["NEMO_DEV_CALLER_TOKEN_GATEWAY"]),)
        purposes = await stub.ListPurposes(request, timeout=5, metadata=gateway)
        assert "tutor_hint" in {purpose.name for purpose in purposes.purposes}


def _oauth_token(stack: DevStack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NEMO, "dev", "oauth-token", "--state-dir", str(stack.state_dir), *args],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=60,
    )


def test_oauth_token_signs_a_seeded_user_in_and_prints_the_token_last(
    dev_stack: DevStack,
) -> None:
    env = dev_stack.env
    done = _oauth_token(dev_stack, "--user", "U-2041-P4", "--scope", "learner.read")
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    issuer = env["NEMO_OAUTH_ISSUER"]
    metadata = httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=10).json()
    keys = KeySet.import_key_set(httpx.get(metadata["jwks_uri"], timeout=10).json())
    claims = jwt.decode(token, keys, algorithms=["RS256"]).claims
    assert claims["iss"] == issuer
    assert claims["aud"] == env["NEMO_MCP_URL"]
    assert claims["sub"] == "U-2041-P4"
    assert claims["client_id"] == env["NEMO_DEV_OAUTH_CLIENT_ID"]
    assert claims["scope"] == "learner.read"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--user", "U-0000-X9"], "sign-in refused: unknown user: U-0000-X9"),
        (
            ["--user", "U-2041-P1", "--resource", "https://edge.example.org/mcp"],
            "authorization refused: invalid_target: ",
        ),
    ],
)
def test_oauth_token_refusals_are_one_line_and_exit_1(
    dev_stack: DevStack, capsys: pytest.CaptureFixture[str], args: list[str], error: str
) -> None:
    assert main(["dev", "oauth-token", "--state-dir", str(dev_stack.state_dir), *args]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"nemo dev: error: {error}")
    assert len(err.strip().splitlines()) == 1


def _nemo(stack: DevStack, *args: str) -> subprocess.CompletedProcess[str]:
    """The nemo command from the project root, in a shell that sourced the stack's dev.env."""
    env = {**os.environ, **stack.env}
    return subprocess.run(
        [NEMO, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


async def test_retention_and_rights_work_with_dev_env(dev_stack: DevStack) -> None:
    retention = _nemo(dev_stack, "retention")
    assert retention.returncode == 0, retention.stderr
    assert "snapshots" in retention.stdout
    assert "erasure_ledger" in retention.stdout

    restricted = _nemo(
        dev_stack, "rights", "restrict", "--learner", "L-2041-2", "--request-id", "DEV-R1",
        "--requested-by", "U-2041-P1",
    )  # fmt: skip
    assert restricted.returncode == 0, restricted.stderr
    listed = _nemo(dev_stack, "rights", "list")
    assert "DEV-R1" in listed.stdout
    assert "in_effect" in listed.stdout
    key = dev_stack.env["NEMO_CALLER_TOKEN_METADATA_KEY"]
    gateway = ((key, dev_stack.env["NEMO_DEV_CALLER_TOKEN_GATEWAY"]),)
    request = context_service_pb2.BuildContextRequest(learner_id="L-2041-2", purpose="tutor_hint")
    async with grpc.aio.insecure_channel(dev_stack.env["NEMO_CONTEXT_ADDR"]) as channel:
        stub = context_service_pb2_grpc.ContextServiceStub(channel)
        refused: grpc.aio.AioRpcError | None = None
        deadline = time.monotonic() + 10
        while refused is None:  # the service reads blocks again within seconds
            try:
                await stub.BuildContext(request, timeout=5, metadata=gateway)
            except grpc.aio.AioRpcError as error:
                refused = error
            assert time.monotonic() < deadline, "the restriction never applied"
            await asyncio.sleep(0.5)
        assert refused.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert error_details(refused).reason == "LEARNER_RESTRICTED"
        lifted = _nemo(dev_stack, "rights", "lift", "--request-id", "DEV-R1")
        assert lifted.returncode == 0, lifted.stderr
        deadline = time.monotonic() + 10
        while True:
            try:
                await stub.BuildContext(request, timeout=5, metadata=gateway)
                break
            except grpc.aio.AioRpcError:
                assert time.monotonic() < deadline, "the restriction was never lifted"
                await asyncio.sleep(0.5)


def _ports_of(stack: DevStack) -> list[str]:
    return [
        *(stack.env[name].rsplit(":", 1)[1] for name in ("NEMO_CONTEXT_ADDR", "NEMO_GATEWAY_ADDR")),
        stack.env["NEMO_TOOLPLANE_ADDR"].rsplit(":", 1)[1],
        str(httpx.URL(stack.env["NEMO_MCP_URL"]).port),
        str(httpx.URL(stack.env["NEMO_OAUTH_ISSUER"]).port),
        str(httpx.URL(stack.env["NEMO_CONSOLE_URL"]).port),
    ]


def _agent_token_works(stack: DevStack) -> bool:
    response = httpx.post(
        stack.env["NEMO_MCP_URL"],
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={
            "Authorization": f"Bearer {stack.env['NEMO_DEV_TOKEN_LEARNING_AGENT']}",
            "Accept": "application/json, text/event-stream",
        },
        timeout=10,
    )
    return response.status_code != 401


def test_a_second_run_on_a_running_stacks_state_is_refused_and_changes_nothing(
    dev_stack: DevStack, dev_state_dir: Path
) -> None:
    env_before = (dev_state_dir / "dev.env").read_text()
    second = subprocess.run(
        _args(dev_state_dir, _ports_of(dev_stack)),
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=60,
    )
    assert second.returncode == 1
    assert "another `nemo dev up` is running" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    assert (dev_state_dir / "dev.env").read_text() == env_before
    assert dev_stack.process.poll() is None
    assert _agent_token_works(dev_stack), "the running stack's agent token was revoked"


def test_a_run_whose_port_is_taken_is_refused_before_it_starts_anything(
    dev_stack: DevStack, fast_scratch_dir: Path
) -> None:
    state_dir = fast_scratch_dir / "dev-stack-port-taken"
    taken = _ports_of(dev_stack)[0]
    ports = [taken, *(str(free_port()) for _ in range(5))]
    second = subprocess.run(
        _args(state_dir, ports), capture_output=True, text=True, env=_environment(), timeout=60
    )
    assert second.returncode == 1
    assert f"port {taken} is in use" in second.stderr
    assert not (state_dir / "pgdata").exists()


def test_ctrl_c_stops_every_process_then_a_rerun_reuses_the_data(
    dev_stack: DevStack, dev_state_dir: Path
) -> None:
    children = _stop(dev_stack)
    assert dev_stack.process.returncode == 0, dev_stack.output.read_text()
    alive = [child for child in children if child.is_running() and child.status() != "zombie"]
    assert not alive, f"left behind: {[child.cmdline() for child in alive]}"

    # A shell that sourced dev.env still has DATABASE_URL: the rerun starts its own server anyway.
    rerun = _start(dev_state_dir, database_url=dev_stack.env["DATABASE_URL"])
    try:
        log = rerun.output.read_text()
        assert "DATABASE_URL is this stack's embedded server" in log
        assert "created database" not in log
        assert "applying" not in log, "a rerun must find its migrated database again"
        assert (
            rerun.env["NEMO_DEV_CALLER_TOKEN_GATEWAY"]
            == dev_stack.env["NEMO_DEV_CALLER_TOKEN_GATEWAY"]
        )
        assert (
            rerun.env["NEMO_DEV_TOKEN_LEARNING_AGENT"]
            != dev_stack.env["NEMO_DEV_TOKEN_LEARNING_AGENT"]
        )
    finally:
        _stop(rerun)


async def test_sigterm_stops_the_stack_too(fast_scratch_dir: Path) -> None:
    stack = await asyncio.to_thread(_start, fast_scratch_dir / "dev-stack-sigterm")
    children = psutil.Process(stack.process.pid).children(recursive=True)
    stack.process.send_signal(signal.SIGTERM)
    await asyncio.to_thread(stack.process.wait, STOP_SECONDS)
    assert stack.process.returncode == 0
    assert not [child for child in children if child.is_running() and child.status() != "zombie"]


async def test_services_do_not_outlive_a_killed_stack(fast_scratch_dir: Path) -> None:
    state_dir = fast_scratch_dir / "dev-stack-killed"
    stack = await asyncio.to_thread(_start, state_dir)
    services = [
        child
        for child in psutil.Process(stack.process.pid).children(recursive=True)
        if "nemo_" in " ".join(child.cmdline()) or "server.mjs" in " ".join(child.cmdline())
    ]
    assert len(services) == 5, "three services, the console and the authorization server"
    stack.process.kill()
    stack.process.wait()
    _, alive = await asyncio.to_thread(psutil.wait_procs, services, STOP_SECONDS)
    assert not alive, f"orphaned: {[p.cmdline() for p in alive]}"
    # PostgreSQL is detached by design (it survives to keep its data safe); stop it here.
    await asyncio.to_thread(lambda: start_embedded_postgres(state_dir / "pgdata").stop())


async def test_the_local_provider_runs_the_gateway_on_the_local_model(
    fast_scratch_dir: Path,
) -> None:
    """`make run NEMO_GATEWAY_PROVIDER=local`: the stack starts the local model server first and
    the gateway answers from it."""
    stack = await asyncio.to_thread(_start, fast_scratch_dir / "dev-stack-local", local_model=True)
    try:
        env = stack.env
        assert env["NEMO_LOCAL_MODEL_URL"].startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(trust_env=False) as client:
            models = (await client.get(f"{env['NEMO_LOCAL_MODEL_URL']}/models")).json()
        assert [model["id"] for model in models["data"]] == ["SmolLM2-135M-Instruct"]
        metadata = ((env["NEMO_CALLER_TOKEN_METADATA_KEY"], env["NEMO_DEV_CALLER_TOKEN_INTERNAL"]),)
        async with grpc.aio.insecure_channel(env["NEMO_GATEWAY_ADDR"]) as channel:
            gateway = gateway_service_pb2_grpc.GatewayServiceStub(channel)
            hint = await gateway.RunPrompt(
                gateway_service_pb2.RunPromptRequest(
                    prompt_id="learner.tutor_hint",
                    learner_id="L-2041-1",
                    variables=_struct(node_id="math-08-algebraic-identities"),
                ),
                metadata=metadata,
                timeout=LOCAL_MODEL_SECONDS,
            )
            events = [
                event
                async for event in gateway.StreamPrompt(
                    gateway_service_pb2.StreamPromptRequest(
                        prompt_id="tutor.chat_reply",
                        session_id="CS-L2-TUTOR",
                        turn_id="T-LOCAL",
                        user_message="Em chưa hiểu phân số bằng nhau ạ.",
                    ),
                    metadata=metadata,
                    timeout=LOCAL_MODEL_SECONDS,
                )
            ]
        # The run records name the local model, which was asked.
        assert (hint.run.provider, hint.run.model) == ("local", "SmolLM2-135M-Instruct")
        assert hint.run.attempts >= 1
        assert hint.output.tutor_hint.hint
        assert any(event.text_delta for event in events)
        reply = events[-1].completed
        assert (reply.run.provider, reply.run.model) == ("local", "SmolLM2-135M-Instruct")
        commands = [
            " ".join(child.cmdline())
            for child in psutil.Process(stack.process.pid).children(recursive=True)
        ]
        assert any("serve.py" in command for command in commands), "the model server runs"
        children = _stop(stack)
        _, alive = await asyncio.to_thread(psutil.wait_procs, children, STOP_SECONDS)
        assert not [child for child in alive if child.status() != "zombie"]
    finally:
        if stack.process.poll() is None:
            stack.process.kill()
            stack.process.wait()
