# repo2env: every target installs what it needs (idempotently, into .venv).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.repo2env-installed
TRAIN_STAMP := $(VENV)/.repo2env-train-installed
PYTEST_ARGS ?=
## pytest-xdist workers for 'make test' (0: one process). Most of the suite waits on containers, builds and
## subprocesses, so three workers keep two cores busy.
TEST_WORKERS ?= 3

.PHONY: install train-extra engine podman registry compose base-image demo train-demo test validate bench docs lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@# The distribution was called repo2env before (a name that, on PyPI, is another project's): drop it.
	@$(BIN)/python -m pip uninstall -q -y repo2env 2>/dev/null || true
	$(BIN)/python -m pip install -q -e '.[dev,docs,openenv,ray]'
	@touch $@

## The train extra (trl, transformers, torch==2.13.0 CPU: a local wheel here, pinned so CUDA builds are never pulled).
train-extra: $(TRAIN_STAMP)

$(TRAIN_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install -q -e '.[train,dev]'
	@touch $@

## A running Docker engine (installs docker.io and starts dockerd as root on Debian).
engine:
	@bash .ci/ensure-docker.sh

## Podman, the second backend (Debian's podman, its catatonit init and runc: crun fails on this cgroup setup).
podman:
	@command -v podman >/dev/null && command -v runc >/dev/null && test -e /usr/libexec/podman/catatonit || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman catatonit runc)

## The distribution registry's binary (Debian's docker-registry), which the --push-images test starts on 127.0.0.1.
registry:
	@command -v docker-registry >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry)

## Docker Compose v2 (`docker compose`), which Harbor's docker environment runs its trials with (the Harbor tests);
## on Debian 12, Debian 13's package's binary as a per-user CLI plugin (see .ci/ensure-compose.sh).
compose: engine
	@bash .ci/ensure-compose.sh

## The local base images (debootstrap + docker import when no registry answers): Python 3.9, 3.11, 3.13, and Node 18 (Debian's nodejs on the 3.11 one).
base-image: install engine
	$(BIN)/repo2env runtime bootstrap --python 3.11 --python 3.9 --python 3.13 --node 18

## The main job on the embedded demo repository -> generated/demo/
demo: base-image
	$(BIN)/repo2env demo run --out generated/demo

## The whole loop on this machine: demo published to a folder, a tiny model taught to call tools, a short
## GRPO run with RepoEnv, evaluation on the held-out split, reward.png -> generated/train-demo/run/
train-demo: base-image train-extra
	$(BIN)/repo2env train --demo --output generated/train-demo

## The whole test suite, Docker, Podman, Harbor and training tests included, on $(TEST_WORKERS) workers
## (worksteal: an idle worker takes tests queued on a busy one); then the tests marked 'alone', which act on
## what every process on the engine shares, by themselves.
test: base-image train-extra registry podman compose
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not alone" $(PYTEST_ARGS)
	$(BIN)/python -m pytest -m alone $(PYTEST_ARGS)

## Validate what is in generated/ (the demo, mined and built first if missing), default policy.
validate: base-image
	@test -f generated/demo/tasks/tasks.jsonl || $(BIN)/repo2env demo run --out generated/demo
	$(BIN)/repo2env validate generated
	@for summary in $$(find generated -name summary.md); do echo; cat $$summary; done

## Every benchmark script (the ones with a main guard; the others are their shared modules). Each adds its
## figures to benchmarks/results/<name>.json, which 'make docs' turns into tables.
bench: base-image
	@for script in $$(grep -l '^if __name__ == .__main__.:' benchmarks/*.py); do echo "== $$script"; $(BIN)/python $$script || exit 1; done

## The documentation site from docs/ into site/ (offline): guides, the CLI reference from the click commands, the
## Python API from the docstrings, and the benchmark tables from benchmarks/results/*.json.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: install
	$(BIN)/ruff check repo2env tests benchmarks

clean:
	find generated -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
	rm -rf .pytest_cache build *.egg-info site
