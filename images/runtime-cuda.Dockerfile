# syntax=docker/dockerfile:1
# The kuberl runtime for NVIDIA GPUs: CUDA, torch, vLLM, Ray, flash-attn and kuberl[runtime].
# Ray head and workers run this image as the `ray` user (uid 1000, the operator's runAsUser) and
# find `kuberl train` on PATH. Build from the repository root (hack/images.sh):
#   docker build -f images/runtime-cuda.Dockerfile -t ghcr.io/kuberl/runtime-cuda:0.1.0 .
ARG CUDA_IMAGE=nvidia/cuda:13.0.2-cudnn-devel-ubuntu22.04

FROM ${CUDA_IMAGE}
ARG KUBERL_VERSION=0.1.0
ARG UV_VERSION=0.13.8
ARG PYTHON_VERSION=3.11.14
ARG TORCH_VERSION=2.13.0
ARG TRANSFORMERS_VERSION=5.19.0
ARG VLLM_VERSION=0.32.0
ARG FLASH_ATTN_VERSION=2.8.3.post2
ARG RAY_VERSION=2.60.0
ARG NINJA_VERSION=1.13.2
LABEL org.opencontainers.image.title="kuberl-runtime-cuda" \
      org.opencontainers.image.version="${KUBERL_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive

# Build tools for flash-attn; git and curl for Ray's runtime_env; the distribution's pip only
# bootstraps uv. Package versions float with the base image's release, which is pinned.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       ca-certificates curl git build-essential python3-pip \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m pip install --no-cache-dir "uv==${UV_VERSION}" \
    && groupadd --gid 1000 ray \
    && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/ray --shell /bin/bash ray

ENV UV_PYTHON_INSTALL_DIR=/opt/python \
    UV_NO_CACHE=1 \
    UV_COMPILE_BYTECODE=1 \
    VIRTUAL_ENV=/opt/kuberl \
    PATH=/opt/kuberl/bin:${PATH} \
    PYTHONUNBUFFERED=1
RUN uv python install "${PYTHON_VERSION}" \
    && uv venv --python "${PYTHON_VERSION}" /opt/kuberl

COPY pyproject.toml README.md /src/
COPY api /src/api
COPY cli /src/cli
COPY operator /src/operator
COPY runtime /src/runtime
# One resolution for the whole stack. The overrides put the image's torch and transformers in
# place of pyproject's exact pins (vLLM caps transformers); flash-attn then compiles against the
# installed torch, so it needs no build isolation.
RUN printf 'torch==%s\ntransformers==%s\n' "${TORCH_VERSION}" "${TRANSFORMERS_VERSION}" \
       > /tmp/overrides.txt \
    && uv pip install --override /tmp/overrides.txt \
       "torch==${TORCH_VERSION}" "vllm==${VLLM_VERSION}" "ray[default]==${RAY_VERSION}" \
       "ninja==${NINJA_VERSION}" "/src[runtime,trackers]" \
    && MAX_JOBS=8 uv pip install --no-build-isolation "flash-attn==${FLASH_ATTN_VERSION}" \
    && rm -rf /src /tmp/overrides.txt

USER 1000:1000
WORKDIR /home/ray
# A bare `docker run` shows the command; the operator submits `kuberl train <config>` via Ray.
CMD ["kuberl", "--help"]
