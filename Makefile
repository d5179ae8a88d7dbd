# Two commands do everything on a fresh machine: `make run` and `make test`.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# uv comes from PATH, or is installed once into .tools/ from the package registry.
UV := $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
UV_VERSION := 0.13.9
RUN := $(UV) run --frozen
# One mypy run per package: each has its own tests/conftest.py, which one run would see as duplicates.
MYPY_TARGETS := libs/nemo-core libs/nemo-devtools libs/nemo-testing services/context services/gateway \
	services/toolplane services/console ops eval "benchmarks mutation libs/nemo-protos/generate.py conftest.py tests local-model/serve.py"
# deptry per package: its sources against its own pyproject.toml; then the test and benchmark code
# against the root's (configured there). The stubs package is installed editable, so deptry is told
# that nemo-protos provides `nemo_protos`.
PACKAGES := libs/nemo-core libs/nemo-protos libs/nemo-devtools libs/nemo-testing services/context \
	services/gateway services/toolplane services/console ops eval
DEPTRY := $(RUN) deptry --package-module-name-map nemo-protos=nemo_protos

.PHONY: help install system-packages generate lint test mutate bench run soak eval local-model browser clean

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.tools/bin/uv:
	python3 -m venv .tools
	.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

install: $(UV) ## Install the locked environments (.venv, and the manifest scanner's deploy/scan/.venv).
	$(UV) sync --frozen
	$(UV) sync --frozen --quiet --project deploy/scan

# Debian packages the tests run for real: PgBouncer (the stack through a connection pooler). As
# root, apt-get installs what is missing; anyone else is told the command.
system-packages: ## Install the Debian packages the tests run (pgbouncer) when missing.
	@if command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "system-packages: installing pgbouncer with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; \
	else \
		echo "system-packages: pgbouncer is missing; install it as root: apt-get install pgbouncer" >&2; \
		exit 1; \
	fi

generate: install ## Regenerate the Python stubs from protos/.
	$(RUN) python libs/nemo-protos/generate.py

lint: install ## buf lint and breaking (against main), ruff, import contracts, deptry, mypy.
	$(RUN) buf lint
	$(RUN) buf breaking --against '.git#branch=main'
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) lint-imports --no-cache
	@for package in $(PACKAGES); do echo "deptry $$package"; \
		$(DEPTRY) $$package/src --config $$package/pyproject.toml; done
	$(DEPTRY) .
	@for target in $(MYPY_TARGETS); do echo "mypy $$target"; $(RUN) mypy $$target; done

test: install system-packages local-model browser ## The whole suite against real PostgreSQL, S3 API, gRPC and HTTP peers, the local model and a real browser.
	$(RUN) pytest

# The console's browser tests drive Debian's Chromium (never a browser a tool downloads).
# The tests launch /usr/bin/chromium, where the package puts it; apt runs through sudo unless root.
browser: ## Install Debian's chromium with apt when it is missing (the console's browser tests).
	@test -x /usr/bin/chromium || { \
		echo "installing Debian's chromium for the console's browser tests"; \
		sudo=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		$$sudo apt-get update -qq && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

mutate: install ## Mutation score of each rule module (>= 90%), survivors listed; slow, not in test.
	$(RUN) python -m mutation

bench: install ## Benchmarks, as ratios against baselines measured in the same run.
	$(RUN) python -m benchmarks

soak: install ## The whole stack under a realistic mix for NEMO_SOAK_SECONDS (default 120).
	$(RUN) python -m benchmarks.soak

# `make run NEMO_GATEWAY_PROVIDER=local` (or the variable in the environment) runs the gateway on the
# local model, which is built first.
run: install $(if $(filter local,$(NEMO_GATEWAY_PROVIDER)),local-model) ## Start the whole local stack on embedded defaults; Ctrl-C stops it.
	$(RUN) nemo dev up

eval: install local-model ## Every prompt over a fixed input set against the configured provider (the local model by default).
	$(RUN) python -m nemo_eval

local-model: $(UV) ## Build the local model server (llama.cpp is compiled once, about 10 minutes on 2 cores).
	@local-model/build.sh $(UV) .nemo/local-model-build.log

clean: ## Remove the environment and local state.
	rm -rf .venv deploy/scan/.venv .tools .nemo
