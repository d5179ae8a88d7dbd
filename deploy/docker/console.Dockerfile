# syntax=docker/dockerfile:1.7
# Image of the console. Build from the repository root:
#   docker build -f deploy/docker/console.Dockerfile -t nemo-console:TAG .

# Builder: resolves nothing; installs exactly what uv.lock pins for nemo-console.
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
COPY services/console/pyproject.toml services/console/
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-install-workspace --package nemo-console

# Then the workspace packages themselves, installed as wheels (not editable) so the runtime
# stage needs nothing from /src.
COPY libs/nemo-protos libs/nemo-protos
COPY libs/nemo-core libs/nemo-core
COPY services/console services/console
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-editable --package nemo-console

# Runtime: the interpreter and the environment; no uv, no sources, no build tools.
FROM python:3.11.14-slim-bookworm
RUN groupadd --system --gid 10001 nemo \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin nemo
COPY --from=builder /opt/nemo/venv /opt/nemo/venv
ENV PATH=/opt/nemo/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NEMO_CONSOLE_LISTEN_ADDRESS=0.0.0.0:8000
USER 10001:10001
# HTTP, behind the ingress controller that terminates TLS.
EXPOSE 8000
# SIGTERM reaches the server directly (no shell in between), which drains and stops gracefully.
ENTRYPOINT ["nemo-console"]
