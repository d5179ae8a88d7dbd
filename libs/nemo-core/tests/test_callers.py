"""Caller identity and ACL on a real server: tokens, mTLS peers, open health and reflection."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.protobuf.wrappers_pb2 import StringValue
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nemo_core_echo import (
    NAME,
    SERVICE,
    TOKENS,
    EchoSettings,
    Running,
    StartEcho,
    stub,
    token_of,
)

from nemo_core.callers import CallerAcl, current_caller
from nemo_core.client import create_channel
from nemo_core.errors import error_details
from nemo_core.settings import DEFAULT_CALLER_TOKEN_METADATA_KEY


async def _echo_error(address: str, metadata: tuple[tuple[str, str], ...]) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Echo")(StringValue(value="hi"), metadata=metadata)
    return raised.value


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param((), id="no-token"),
        pytest.param((("x-nemo-caller-token", "wrong-token-0123456789"),), id="wrong-token"),
        pytest.param((("x-nemo-caller-token", ""),), id="empty-token"),
        pytest.param((("authorization", "gateway-token-0123456789"),), id="token-under-other-key"),
    ],
)
async def test_call_without_valid_identity_is_unauthenticated(
    echo: Running, metadata: tuple[tuple[str, str], ...]
) -> None:
    details = error_details(await _echo_error(echo.address, metadata))
    assert details.code is grpc.StatusCode.UNAUTHENTICATED
    assert details.reason == "CALLER_UNAUTHENTICATED"
    assert details.domain == NAME


async def test_known_caller_outside_acl_is_permission_denied(echo: Running) -> None:
    details = error_details(await _echo_error(echo.address, token_of("stranger")))
    assert details.code is grpc.StatusCode.PERMISSION_DENIED
    assert details.reason == "CALLER_NOT_ALLOWED"
    assert details.domain == NAME
    assert details.metadata == {"caller": "stranger", "method": f"/{SERVICE}/Echo"}


async def test_acl_is_per_method(echo: Running) -> None:
    async with grpc.aio.insecure_channel(echo.address) as channel:
        reply = await stub(channel, "Echo")(StringValue(value="hi"), metadata=token_of("toolplane"))
        assert reply.value == "toolplane:hi"
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Fail")(StringValue(value="x"), metadata=token_of("toolplane"))
    assert error_details(raised.value).reason == "CALLER_NOT_ALLOWED"


async def test_allowed_caller_is_visible_to_the_handler(echo: Running) -> None:
    async with grpc.aio.insecure_channel(echo.address) as channel:
        reply = await stub(channel, "Echo")(StringValue(value="hi"), metadata=token_of("gateway"))
    assert reply.value == "gateway:hi"


async def test_custom_metadata_key(start_echo: StartEcho) -> None:
    running = await start_echo(caller_token_metadata_key="x-other-key")
    token = token_of("gateway")[0][1]
    async with grpc.aio.insecure_channel(running.address) as channel:
        reply = await stub(channel, "Echo")(
            StringValue(value="k"), metadata=(("x-other-key", token),)
        )
    assert reply.value == "gateway:k"
    error = await _echo_error(running.address, token_of("gateway"))
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_during_a_rotation_both_the_new_and_the_previous_token_identify_a_caller(
    start_echo: StartEcho,
) -> None:
    new_token = "gateway-token-rotated-0123456789"
    running = await start_echo(
        caller_tokens={**TOKENS, "gateway": new_token},
        previous_caller_tokens={"gateway": TOKENS["gateway"]},
    )
    async with grpc.aio.insecure_channel(running.address) as channel:
        for token in (new_token, TOKENS["gateway"]):
            reply = await stub(channel, "Echo")(
                StringValue(value="r"), metadata=((DEFAULT_CALLER_TOKEN_METADATA_KEY, token),)
            )
            assert reply.value == "gateway:r"
    # Once the previous tokens are removed, only the new one is accepted.
    finished = await start_echo(caller_tokens={**TOKENS, "gateway": new_token})
    error = await _echo_error(finished.address, token_of("gateway"))
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_health_is_open_without_token(echo: Running) -> None:
    async with grpc.aio.insecure_channel(echo.address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SERVICE)
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_current_caller_outside_rpc_fails() -> None:
    with pytest.raises(RuntimeError):
        current_caller()


def test_acl_matches_short_and_full_names() -> None:
    acl = CallerAcl({"a": {"Get"}, "b": {"/pkg.S/Get"}, "c": {"/pkg.Other/Get"}, "d": set()})
    assert acl.callers_of("/pkg.S/Get") == {"a", "b"}
    assert acl.callers_of("/pkg.S/Put") == frozenset()
    assert acl.identities == {"a", "b", "c", "d"}


@pytest.mark.parametrize("table", [{"Gateway": {"Get"}}, {"gateway": "Get"}])
def test_acl_rejects_malformed_tables(table: dict[str, object]) -> None:
    with pytest.raises((ValueError, TypeError)):
        CallerAcl(table)  # type: ignore[arg-type]


# mTLS: identity comes from the client certificate.


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(
    subject_cn: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    dns_names: list[str],
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if dns_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write(
    directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> None:
    (directory / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / f"{stem}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for localhost and client certificates for several peers."""
    directory = tmp_path_factory.mktemp("pki")
    ca_key = _key()
    ca = _cert("nemo test ca", ca_key, None, ca_key, [])
    (directory / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    peers = {
        "server": ("echo", ["localhost"]),
        "gateway": ("gateway", []),
        "san-toolplane": ("some-host", ["toolplane"]),
        "intruder": ("intruder", ["intruder.example"]),
    }
    for stem, (cn, dns_names) in peers.items():
        key = _key()
        _write(directory, stem, _cert(cn, key, ca, ca_key, dns_names), key)
    return directory


def _tls_settings(pki: Path, stem: str) -> dict[str, Any]:
    return {
        "tls_cert_file": pki / f"{stem}.crt",
        "tls_key_file": pki / f"{stem}.key",
        "tls_ca_file": pki / "ca.crt",
    }


@pytest.fixture
async def tls_echo(start_echo: StartEcho, pki: Path) -> Running:
    running = await start_echo(listen_address="localhost:0", **_tls_settings(pki, "server"))
    port = running.address.rsplit(":", 1)[1]
    running.address = f"localhost:{port}"
    return running


@pytest.mark.parametrize(
    ("stem", "identity"), [("gateway", "gateway"), ("san-toolplane", "toolplane")]
)
async def test_mtls_identity_from_certificate(
    tls_echo: Running, pki: Path, stem: str, identity: str
) -> None:
    client_settings = EchoSettings(**_tls_settings(pki, stem))
    async with create_channel(tls_echo.address, client_settings) as channel:
        reply = await stub(channel, "Echo")(StringValue(value="tls"))
    assert reply.value == f"{identity}:tls"


async def test_mtls_unknown_certificate_name_is_unauthenticated(
    tls_echo: Running, pki: Path
) -> None:
    client_settings = EchoSettings(**_tls_settings(pki, "intruder"))
    async with create_channel(tls_echo.address, client_settings) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Echo")(StringValue(value="tls"))
    assert error_details(raised.value).reason == "CALLER_UNAUTHENTICATED"


async def test_mtls_ignores_tokens(tls_echo: Running, pki: Path) -> None:
    client_settings = EchoSettings(**_tls_settings(pki, "intruder"))
    async with create_channel(tls_echo.address, client_settings) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Echo")(StringValue(value="tls"), metadata=token_of("gateway"))
    assert raised.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_mtls_requires_a_client_certificate(tls_echo: Running, pki: Path) -> None:
    credentials = grpc.ssl_channel_credentials(root_certificates=(pki / "ca.crt").read_bytes())
    async with grpc.aio.secure_channel(tls_echo.address, credentials) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(channel, "Echo")(StringValue(value="tls"), timeout=5)
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
