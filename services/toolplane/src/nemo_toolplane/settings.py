"""Settings of the tool plane (environment variables prefixed NEMO_TOOLPLANE_)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from nemo_core.client import channel_target
from nemo_core.oauth.config import IntrospectionConfig, OAuthConfig
from nemo_core.people import PeopleSettings
from nemo_core.secret_files import SECRET_FILE
from nemo_core.settings import ServiceSettings
from nemo_toolplane.limits.calls import DEFAULT_TOOL_CALL_LIMITS, CallLimit
from nemo_toolplane.mcp.origins import check_host_pattern, check_origin_pattern
from nemo_toolplane.tool_kinds import Scope


class ToolPlaneSettings(ServiceSettings, PeopleSettings):
    """Tool plane settings."""

    model_config = SettingsConfigDict(env_prefix="NEMO_TOOLPLANE_", extra="ignore", frozen=True)

    listen_address: str = Field(
        "127.0.0.1:50053",
        description="host:port the gRPC server listens on (0.0.0.0:50053 in a container).",
    )
    mcp_host: str = Field(
        "127.0.0.1",
        description="Interface the MCP edge (HTTP) listens on (0.0.0.0 in a container).",
    )
    mcp_port: int = Field(8080, ge=0, le=65535, description="Port of the MCP edge; 0 picks one.")
    database_url: Annotated[SecretStr, SECRET_FILE] = Field(
        description="postgresql:// URL connecting as the nemo_toolplane role; required.",
    )
    database_pool_size: int = Field(
        10, gt=0, description="Maximum PostgreSQL connections of this process."
    )
    database_transaction_pooling: bool = Field(
        False,
        description="database_url goes through a pooler in transaction mode (PgBouncer "
        "pool_mode=transaction): no statement is kept prepared on a server connection, and "
        "database_direct_url is required.",
    )
    database_direct_url: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None,
        description="postgresql:// URL as the nemo_toolplane role straight to PostgreSQL, for "
        "the access change listener alone (LISTEN needs a session of its own, which a "
        "transaction pooler does not keep); unset: database_url.",
    )
    context_address: str = Field(
        "127.0.0.1:50051",
        description="host:port of the context service; calls are balanced over every address "
        "it resolves to (a headless Service: dns:///NAME:PORT), or over a comma-separated list "
        "of IP host:port addresses.",
    )
    environment: Literal["development", "staging", "production"] = Field(
        "development",
        description="Environment the tool plane runs in; grants and policies match against it.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origins (scheme://host[:port], JSON list; port * for any) whose browser "
        "requests the MCP edge accepts, with CORS; a request carrying any other Origin header "
        "gets 403. Clients that send no Origin (agents, SDKs) are unaffected.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host header values (host[:port], JSON list; port * for any) the MCP edge "
        "answers; any other gets 421, so a name rebound to the edge's address is refused. "
        "Empty: any Host (behind an ingress that routes by name).",
    )
    context_timeout_seconds: float = Field(
        5.0,
        gt=0,
        description="Longest a call to the context service may take; a gRPC caller's shorter "
        "deadline wins.",
    )
    agent_calls_per_second: float = Field(
        20.0,
        gt=0,
        description="Sustained tools/call rate allowed per agent, on every tool and summed over "
        "every replica; calls beyond it get RATE_LIMITED (retryable).",
    )
    agent_call_burst: int = Field(
        40, gt=0, description="Calls an agent may make at once before its rate applies."
    )
    user_calls_per_second: float = Field(
        5.0,
        gt=0,
        description="Sustained tools/call rate allowed per agent and user it acts for (every "
        "tool, every replica), so one user cannot use up an agent for its other users; calls "
        "made for nobody are not counted here.",
    )
    user_call_burst: int = Field(
        20, gt=0, description="Calls an agent may make at once for one user."
    )
    tool_call_limits: list[CallLimit] = Field(
        default_factory=lambda: list(DEFAULT_TOOL_CALL_LIMITS),
        description="Limits on some tools, JSON list of {tools, per, per_second, burst}: tools "
        "are names and globs (comma-separated), per lists what a limit counts per (agent, user, "
        "tool; [] for one bucket for all those calls). Every limit applying to a call must "
        "have a token left, across every replica.",
    )
    limits_timeout_seconds: float = Field(
        0.5,
        gt=0,
        description="Longest a call waits for the shared limits (in PostgreSQL); past it, a "
        "tool that writes is refused with DEPENDENCY_ERROR (retryable) and any other call is "
        "limited by this replica alone.",
    )
    auth_failures_per_minute: int = Field(
        20,
        gt=0,
        description="Failed authentications allowed per client address and minute, across every "
        "replica; beyond them, requests from that address with a missing or invalid token get "
        "429 instead of 401 (a valid token still gets through).",
    )
    access_max_age_seconds: float = Field(
        30.0,
        gt=0,
        description="Longest a token and its rules are kept in memory; changes normally reach "
        "every replica within milliseconds (PostgreSQL notifications), this bounds a lost one.",
    )
    access_heartbeat_seconds: float = Field(
        10.0,
        gt=0,
        description="How often the connection that receives change notifications is probed; "
        "one that does not answer within this time is replaced and every cached token dropped.",
    )
    approval_ttl_seconds: int = Field(
        3600,
        gt=0,
        description="How long an approval request stays usable: a person must approve it and "
        "the agent repeat the call within this time.",
    )
    approval_decide_seconds: int = Field(
        900,
        gt=0,
        description="Time a person has to decide an approval request; one still pending then is "
        "denied (at most approval_ttl_seconds).",
    )
    approval_requests_per_hour: int = Field(
        20,
        gt=0,
        description="New approval requests one agent may file with one credential (agent token, "
        "or OAuth client) per hour, whatever user it names; beyond them the call gets "
        "RATE_LIMITED instead of another request for the operators.",
    )
    approval_busy_wait_seconds: float = Field(
        5.0,
        gt=0,
        description="Longest a repeated approved call waits for an earlier attempt that still "
        "holds the approval (the caller's shorter deadline wins); it then gets CONFLICT "
        "(retryable), never a second approval request.",
    )
    audit_flush_seconds: float = Field(
        0.0,
        ge=0,
        description="Longest an audit row waits for others before its write starts (0: at "
        "once); the rows of calls that end while a write is in flight share the next one.",
    )
    audit_answer_wait_seconds: float = Field(
        1.0,
        gt=0,
        description="Longest a call's answer waits for its audit row to be stored (so a replica "
        "that dies loses no row of an answered call); past it the call answers anyway, and "
        "later calls stop waiting until the store accepts a write again.",
    )
    audit_batch_size: int = Field(
        500, gt=0, description="Most audit rows written in one statement."
    )
    audit_buffer_rows: int = Field(
        10_000,
        gt=0,
        description="Most audit rows waiting in memory for the database; beyond them (the "
        "database is slow or down) each row is logged in full instead, and counted.",
    )
    audit_statement_timeout_seconds: float = Field(
        5.0,
        gt=0,
        description="Longest one audit write may wait for a connection and then for its "
        "statement; rows of a write that fails or times out are logged in full instead.",
    )
    http_header_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="Longest the MCP edge waits for a request's headers (from the connection's "
        "start, or the end of its previous response); the connection is closed past it.",
    )
    http_body_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="Longest the MCP edge waits for a request's body once its headers came; "
        "past it the request gets 408 (audited).",
    )
    oauth_issuer: str | None = Field(
        None,
        description="Issuer URL of the OpenID provider whose OAuth access tokens the edge "
        "accepts beside agent tokens (its metadata and keys are read from it); unset: agent "
        "tokens only.",
    )
    oauth_resource: str | None = Field(
        None,
        description="The edge's public URL as tokens name it in aud (RFC 8707), e.g. "
        "https://edge.example.org/mcp; required with oauth_issuer. Tokens for any other "
        "audience, or without one, are refused.",
    )
    oauth_jwks_uri: str | None = Field(
        None, description="URL of the issuer's signing keys; unset: from the issuer's metadata."
    )
    oauth_algorithms: list[str] = Field(
        default_factory=lambda: ["RS256", "PS256", "ES256", "EdDSA"],
        description="Signature algorithms accepted on access tokens (JSON list); asymmetric "
        "ones only, so none and HS256 are never accepted.",
    )
    oauth_leeway_seconds: float = Field(
        30.0,
        ge=0,
        le=300,
        description="Clock difference tolerated on a token's exp, nbf and iat.",
    )
    oauth_accept_untyped_tokens: bool = Field(
        False,
        description="Also accept JWT access tokens typed generically (typ JWT, or none) rather "
        "than as access tokens (at+jwt, RFC 9068), for providers that write no other type "
        "(Keycloak's clients by default); a token typed as anything else is refused either way.",
    )
    oauth_user_claim: str = Field(
        "sub",
        min_length=1,
        description="Claim of the access token holding the platform user id the agent acts "
        "for (for example platform_user_id when the provider's sub is its own id).",
    )
    oauth_client_claim: str = Field(
        "client_id",
        min_length=1,
        description="Claim of the access token naming the OAuth client (azp for providers "
        "that write no client_id); the client is mapped to an agent by nemo oauth-clients.",
    )
    oauth_jwks_refresh_seconds: float = Field(
        30.0,
        gt=0,
        description="Shortest time between two fetches of the issuer's keys caused by tokens "
        "signed with a key id not among them (rotation); bounds what forged key ids cost.",
    )
    oauth_jwks_max_age_seconds: float = Field(
        3600.0, gt=0, description="Longest the issuer's keys are used before being fetched again."
    )
    oauth_introspection_client_id: str | None = Field(
        None,
        description="Client id of the edge at the issuer's introspection endpoint (RFC 7662); "
        "set to accept opaque access tokens, which are introspected (JWTs are verified "
        "locally either way).",
    )
    oauth_introspection_client_secret: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None, description="Client secret of the edge at the introspection endpoint."
    )
    oauth_introspection_endpoint: str | None = Field(
        None, description="Introspection endpoint; unset: from the issuer's metadata."
    )
    oauth_introspection_cache_seconds: float = Field(
        30.0,
        ge=0,
        description="Longest an introspection answer for an active token is reused (never past "
        "the token's expiry): a token revoked at the issuer is refused within this time.",
    )
    docs_dir: Path = Field(
        Path("docs"),
        description="Directory of the Markdown corpus of the docs tools (the repository's "
        "docs/); indexed on the first docs call.",
    )
    docs_base_url: str = Field(
        "https://docs.nemo12.com",
        description="Public address of the docs site; search hits and pages link to it.",
    )

    def call_limits(self) -> list[CallLimit]:
        """Every call limit: per agent, per agent and user (both on every tool), then the tool
        limits."""
        return [
            CallLimit(
                per=("agent",), per_second=self.agent_calls_per_second, burst=self.agent_call_burst
            ),
            CallLimit(
                per=("agent", "user"),
                per_second=self.user_calls_per_second,
                burst=self.user_call_burst,
            ),
            *self.tool_call_limits,
        ]

    def oauth_config(self) -> OAuthConfig | None:
        """What the edge's resource server checks; None when it accepts agent tokens only."""
        if self.oauth_issuer is None or self.oauth_resource is None:
            return None
        introspection = None
        if self.oauth_introspection_client_id is not None:
            secret = self.oauth_introspection_client_secret
            introspection = IntrospectionConfig(
                client_id=self.oauth_introspection_client_id,
                client_secret=secret.get_secret_value() if secret is not None else "",
                endpoint=self.oauth_introspection_endpoint,
                cache_seconds=self.oauth_introspection_cache_seconds,
            )
        return OAuthConfig(
            issuer=self.oauth_issuer,
            resource=self.oauth_resource,
            scopes=tuple(scope.value for scope in Scope),
            algorithms=tuple(self.oauth_algorithms),
            leeway_seconds=self.oauth_leeway_seconds,
            accept_untyped=self.oauth_accept_untyped_tokens,
            user_claim=self.oauth_user_claim,
            client_claim=self.oauth_client_claim,
            jwks_uri=self.oauth_jwks_uri,
            jwks_refresh_seconds=self.oauth_jwks_refresh_seconds,
            jwks_max_age_seconds=self.oauth_jwks_max_age_seconds,
            introspection=introspection,
        )

    @model_validator(mode="after")
    def _check_oauth(self) -> Self:
        if (self.oauth_issuer is None) != (self.oauth_resource is None):
            raise ValueError("oauth_issuer and oauth_resource are set together, or neither")
        secret = self.oauth_introspection_client_secret
        if self.oauth_introspection_client_id is not None and not (
            secret and secret.get_secret_value()
        ):
            raise ValueError(
                "oauth_introspection_client_id needs oauth_introspection_client_secret"
            )
        self.oauth_config()  # the URLs and algorithms, checked once at start
        return self

    @model_validator(mode="after")
    def _check_listener_connection(self) -> Self:
        # Through a transaction pooler, LISTEN lands on a server connection the listener does
        # not keep: notifications would be lost while the heartbeat still answered, and every
        # revocation would wait for the cache's maximum age.
        if self.database_transaction_pooling and self.database_direct_url is None:
            raise ValueError(
                "database_direct_url is required with database_transaction_pooling: the access "
                "change listener needs a direct connection"
            )
        return self

    def listener_database_url(self) -> str:
        """Where the access change listener connects: never through a transaction pooler."""
        url = self.database_direct_url or self.database_url
        return url.get_secret_value()

    @model_validator(mode="after")
    def _check_call_limits(self) -> Self:
        names = [limit.name for limit in self.call_limits()]
        if len(set(names)) != len(names):
            raise ValueError(
                "tool_call_limits: two limits count the same tools per the same things "
                "(the agent and user limits cover every tool)"
            )
        return self

    @field_validator("context_address")
    @classmethod
    def _check_context_address(cls, value: str) -> str:
        channel_target(value)
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _check_origins(cls, value: list[str]) -> list[str]:
        return [check_origin_pattern(pattern) for pattern in value]

    @field_validator("allowed_hosts")
    @classmethod
    def _check_hosts(cls, value: list[str]) -> list[str]:
        return [check_host_pattern(pattern) for pattern in value]
