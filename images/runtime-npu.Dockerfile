# syntax=docker/dockerfile:1
# The kuberl runtime for Ascend NPUs: CANN, torch + torch_npu, vLLM + vllm-ascend, Ray and
# kuberl[runtime], with the environment of CANN's set_env.sh scripts and the HCCL settings Ascend
# RL stacks run with. Ray head and workers run it as the `ray` user (uid 1000). Build from the
# repository root (hack/images.sh):
#   docker build -f images/runtime-npu.Dockerfile -t ghcr.io/kuberl/runtime-npu:0.1.0 .
ARG CANN_IMAGE=ascendai/cann:8.3.rc1-910b-ubuntu22.04-py3.11

FROM ${CANN_IMAGE}
ARG KUBERL_VERSION=0.1.0
ARG UV_VERSION=0.13.8
ARG NPU_TORCH_VERSION=2.11.0
ARG TORCH_NPU_VERSION=2.11.0.post3
ARG NPU_VLLM_VERSION=0.23.0
ARG VLLM_ASCEND_VERSION=0.23.0.post1
ARG RAY_VERSION=2.60.0
LABEL org.opencontainers.image.title="kuberl-runtime-npu" \
      org.opencontainers.image.version="${KUBERL_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive

# What `source ascend-toolkit/set_env.sh && source nnal/atb/set_env.sh` would export, as image
# environment so that every process sees it: Ray's raylet and the workers it spawns run no shell.
ENV ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/latest \
    ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest \
    ASCEND_AICPU_PATH=/usr/local/Ascend/ascend-toolkit/latest \
    ASCEND_OPP_PATH=/usr/local/Ascend/ascend-toolkit/latest/opp \
    TOOLCHAIN_HOME=/usr/local/Ascend/ascend-toolkit/latest/toolkit \
    ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1
ENV LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/common:/usr/local/Ascend/driver/lib64/driver:${ASCEND_TOOLKIT_HOME}/lib64:${ASCEND_TOOLKIT_HOME}/lib64/plugin/opskernel:${ASCEND_TOOLKIT_HOME}/lib64/plugin/nnengine:${ATB_HOME_PATH}/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}} \
    PYTHONPATH=${ASCEND_TOOLKIT_HOME}/python/site-packages:${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe \
    PATH=/opt/kuberl/bin:${ASCEND_TOOLKIT_HOME}/bin:${ASCEND_TOOLKIT_HOME}/compiler/ccec_compiler/bin:${PATH}
# HCCL and the NPU runtime as kuberl's device module expects them: torch loads torch_npu by
# itself (so torch.npu exists), Ray leaves ASCEND_RT_VISIBLE_DEVICES to the launcher, and
# collectives wait long enough for the first rollout and checkpoint. With hostNetwork the pod
# must also set HCCL_IF_IP to status.hostIP (a pod-spec concern, not the image's).
ENV TORCH_DEVICE_BACKEND_AUTOLOAD=1 \
    RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1 \
    PYTORCH_NPU_ALLOC_CONF=expandable_segments:True \
    HCCL_CONNECT_TIMEOUT=1800 \
    HCCL_EXEC_TIMEOUT=3600 \
    TASK_QUEUE_ENABLE=2 \
    VLLM_USE_V1=1 \
    PYTHONUNBUFFERED=1

# git for Ray's runtime_env and building vLLM; a login shell (KubeRay starts Ray with
# `bash -lc`) also sources CANN's own scripts, for anything the ENV above does not cover.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl git build-essential \
    && rm -rf /var/lib/apt/lists/* \
    && printf '%s\n' \
       '[ -f /usr/local/Ascend/ascend-toolkit/set_env.sh ] && . /usr/local/Ascend/ascend-toolkit/set_env.sh' \
       '[ -f /usr/local/Ascend/nnal/atb/set_env.sh ] && . /usr/local/Ascend/nnal/atb/set_env.sh' \
       > /etc/profile.d/ascend.sh \
    && python3 -m pip install --no-cache-dir "uv==${UV_VERSION}" \
    && groupadd --gid 1000 ray \
    && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/ray --shell /bin/bash ray

ENV UV_NO_CACHE=1 \
    UV_COMPILE_BYTECODE=1 \
    VIRTUAL_ENV=/opt/kuberl
# The venv sees the base image's site-packages: CANN's Python dependencies live there.
RUN uv venv --system-site-packages --python python3 /opt/kuberl

COPY pyproject.toml README.md /src/
COPY api /src/api
COPY cli /src/cli
COPY operator /src/operator
COPY runtime /src/runtime
# torch is overridden to the version torch_npu and vllm-ascend are built for. vLLM is built
# from source with no device target (vllm-ascend supplies the NPU platform), then vllm-ascend
# compiles its kernels against CANN and the installed torch_npu.
RUN printf 'torch==%s\n' "${NPU_TORCH_VERSION}" > /tmp/overrides.txt \
    && uv pip install --override /tmp/overrides.txt \
       "torch==${NPU_TORCH_VERSION}" "torch-npu==${TORCH_NPU_VERSION}" \
       "ray[default]==${RAY_VERSION}" "/src[runtime,trackers]" \
    && VLLM_TARGET_DEVICE=empty uv pip install --override /tmp/overrides.txt \
       --no-binary-package vllm "vllm==${NPU_VLLM_VERSION}" \
    && uv pip install --override /tmp/overrides.txt --no-build-isolation \
       "vllm-ascend==${VLLM_ASCEND_VERSION}" \
    && rm -rf /src /tmp/overrides.txt

USER 1000:1000
WORKDIR /home/ray
CMD ["kuberl", "--help"]
