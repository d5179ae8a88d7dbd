"""Settings of the context service (environment variables prefixed NEMO_CONTEXT_)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from nemo_core.people import PeopleSettings
from nemo_core.secret_files import SECRET_FILE
from nemo_core.settings import ServiceSettings

MIN_PSEUDONYM_KEY_LENGTH = 32
MIN_IDENTIFIER_KEY_LENGTH = 32
DEVELOPMENT_IDENTIFIER_KEY = "nemo-development-identifier-key-not-a-secret"
"""The identifier key of development databases: ``nemo seed`` registers its digest, so a
service on a developer's machine needs no key of its own. Never registered anywhere else."""


class ContextSettings(ServiceSettings, PeopleSettings):
    """Context service settings."""

    model_config = SettingsConfigDict(env_prefix="NEMO_CONTEXT_", extra="ignore", frozen=True)

    listen_address: str = Field(
        "127.0.0.1:50051",
        description="host:port the gRPC server listens on (0.0.0.0:50051 in a container).",
    )
    database_url: Annotated[SecretStr, SECRET_FILE] = Field(
        description="postgresql:// URL connecting as the nemo_context role; required.",
    )
    database_pool_size: int = Field(
        10, gt=0, description="Maximum PostgreSQL connections of this process."
    )
    database_transaction_pooling: bool = Field(
        False,
        description="database_url goes through a pooler in transaction mode (PgBouncer "
        "pool_mode=transaction): no statement is kept prepared on a server connection.",
    )
    environment: Literal["development", "staging", "production"] = Field(
        "development",
        description="Where the service runs. Outside development it refuses to start without "
        "a pseudonym key.",
    )
    pseudonym_key: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None,
        description="Secret key of the learner pseudonym (learner_ref = nemo_ + 24 hex of "
        f"HMAC-SHA256), at least {MIN_PSEUDONYM_KEY_LENGTH} characters; keep it stable, or "
        "learner refs change. Required outside development; in development an unset key means "
        "a random key per process (refs then change on every restart, and a warning says so).",
    )
    identifier_key: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None,
        description="Secret key of the identifier fingerprints (HMAC-SHA256 of the folded words "
        "of the names, contacts, addresses, schools and birth dates around a learner, which the "
        f"identifier gate matches without reading them), at least {MIN_IDENTIFIER_KEY_LENGTH} "
        "characters; its SHA-256 digest must be registered in learning.identifier_keys. Required "
        "outside development; in development an unset key means the development key the demo "
        "seed registers.",
    )
    snapshot_master_key: Annotated[SecretStr | None, SECRET_FILE] = Field(
        None,
        description="Secret that wraps each learner's snapshot data key and names learners in "
        f"the rights tables, at least {MIN_PSEUDONYM_KEY_LENGTH} characters; losing it makes "
        "every snapshot unreadable. Required outside development; in development an unset key "
        "means a random key per process (snapshots then cannot be read after a restart).",
    )
    snapshot_backend: Literal["local", "s3"] = Field(
        "local",
        description="Where context snapshots are written: a local directory (the embedded "
        "default) or an S3-compatible bucket.",
    )
    snapshot_dir: Path = Field(
        Path(".nemo/snapshots"),
        description="Directory of the local snapshot backend.",
    )
    snapshot_s3_bucket: str | None = Field(
        None, description="Bucket of the s3 snapshot backend; required with it."
    )
    snapshot_s3_endpoint_url: str | None = Field(
        None,
        description="Endpoint of an S3-compatible service (MinIO, R2, ...); unset means AWS S3. "
        "Credentials come from the standard AWS variables and files.",
    )
    snapshot_s3_region: str | None = Field(
        None, description="Region of the snapshot bucket; unset means the AWS default chain."
    )
    snapshot_retention_days: int = Field(
        30,
        gt=0,
        description="Days a snapshot is kept: the bucket lifecycle rule and `nemo purge` "
        "delete older ones.",
    )
    snapshot_write_timeout_seconds: float = Field(
        2.0,
        gt=0,
        description="Longest a snapshot write may take; a slower or failed write leaves "
        "input_ref empty instead of delaying the caller.",
    )
    conversation_recent_turns: int = Field(
        8,
        gt=0,
        description="Completed turns a conversation bundle carries verbatim; older ones are "
        "covered by the stored summary.",
    )
    conversation_token_budget: int = Field(
        4000,
        gt=0,
        description="Token budget of a conversation bundle when the request sets none.",
    )
    conversation_knowledge_limit: int = Field(
        3,
        ge=0,
        description="Knowledge nodes retrieved for the current message of a conversation.",
    )

    @model_validator(mode="after")
    def _check_secret_keys(self) -> Self:
        for what, key, minimum in (
            ("pseudonym", self.pseudonym_key, MIN_PSEUDONYM_KEY_LENGTH),
            ("identifier", self.identifier_key, MIN_IDENTIFIER_KEY_LENGTH),
            ("snapshot master", self.snapshot_master_key, MIN_PSEUDONYM_KEY_LENGTH),
        ):
            variable = f"NEMO_CONTEXT_{what.upper().replace(' ', '_')}_KEY"
            if key is None:
                if self.environment != "development":
                    article = "an" if what[0] in "aeiou" else "a"
                    raise ValueError(
                        f"the {self.environment} environment needs {article} {what} key: set "
                        f"{variable} or {variable}_FILE"
                    )
            elif len(key.get_secret_value()) < minimum:
                raise ValueError(f"the {what} key must be at least {minimum} characters")
        return self

    def identifier_key_bytes(self) -> bytes:
        """The identifier key as the fingerprints use it (the development key when unset)."""
        key = self.identifier_key
        return (key.get_secret_value() if key else DEVELOPMENT_IDENTIFIER_KEY).encode("utf-8")

    @model_validator(mode="after")
    def _check_snapshot_backend(self) -> Self:
        if self.snapshot_backend == "s3" and not self.snapshot_s3_bucket:
            raise ValueError("snapshot_backend s3 needs snapshot_s3_bucket")
        return self
