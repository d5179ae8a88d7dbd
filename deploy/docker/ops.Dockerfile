# syntax=docker/dockerfile:1.7
# Image of the `nemo` operator command; its default command applies the database migrations
# (the Kubernetes migration Job runs it). Build from the repository root:
#   docker build -f deploy/docker/ops.Dockerfile -t nemo-ops:TAG .

# Builder: installs exactly what uv.lock pins for nemo-ops, except the embedded PostgreSQL
# server (pgserver), which only `nemo dev up` uses and which is imported lazily.
FROM python:3.11.14-slim-bookworm AS builder
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /usr/local/bin/uv
# Bytecode is compiled here because the runtime root filesystem is read-only; the environment
# lives at the same path in both stages so its scripts' interpreter paths stay valid.
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/nemo/venv
WORKDIR /src

# Third-party dependencies first: this layer is reused until uv.lock changes.
COPY pyproject.toml uv.lock ./
COPY libs/nemo-protos/pyproject.toml libs/nemo-protos/
COPY libs/nemo-core/pyproject.toml libs/nemo-core/
COPY libs/nemo-devtools/pyproject.toml libs/nemo-devtools/
COPY services/context/pyproject.toml services/context/
COPY services/gateway/pyproject.toml services/gateway/
COPY services/toolplane/pyproject.toml services/toolplane/
COPY services/console/pyproject.toml services/console/
COPY ops/pyproject.toml ops/
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-install-workspace --package nemo-ops \
        --no-install-package pgserver

# Then the workspace packages themselves (the SQL migrations ship inside nemo-ops), installed
# as wheels (not editable) so the runtime stage needs nothing from /src.
COPY libs/nemo-protos libs/nemo-protos
COPY libs/nemo-core libs/nemo-core
COPY libs/nemo-devtools libs/nemo-devtools
COPY services/context services/context
COPY services/gateway services/gateway
COPY services/toolplane services/toolplane
COPY services/console services/console
COPY ops ops
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-editable --package nemo-ops --no-install-package pgserver

# Runtime: the interpreter and the environment; no uv, no sources, no build tools.
FROM python:3.11.14-slim-bookworm
RUN groupadd --system --gid 10001 nemo \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin nemo
COPY --from=builder /opt/nemo/venv /opt/nemo/venv
ENV PATH=/opt/nemo/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
# `nemo migrate` reads DATABASE_URL(_FILE) (the owner role) and NEMO_DB_*_PASSWORD(_FILE); any other
# subcommand can be given instead, for example `issue-token learning-agent --user U-2041-P1`.
ENTRYPOINT ["nemo"]
CMD ["migrate"]
