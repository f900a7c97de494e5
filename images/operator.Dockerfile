# syntax=docker/dockerfile:1
# The kuberl operator: CPython, kopf, the Kubernetes client and prometheus-client; no torch, ray
# or vllm. Build from the repository root (hack/images.sh passes images/versions.env):
#   docker build -f images/operator.Dockerfile -t ghcr.io/kuberl/operator:0.1.0 .
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE}
ARG KUBERL_VERSION=0.1.0
LABEL org.opencontainers.image.title="kuberl-operator" \
      org.opencontainers.image.description="kuberl operator: RLTrainingJob -> RayCluster + Ray job" \
      org.opencontainers.image.version="${KUBERL_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# 65532 is the chart's podSecurityContext.runAsUser; the home directory does not exist on purpose
# (the root filesystem is read-only at run time, /tmp is an emptyDir).
RUN groupadd --system --gid 65532 kuberl \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin kuberl

# kuberl's requirements for the operator (its dependencies and the `operator` extra), read from
# pyproject.toml alone by images/requirements.py, in a layer of their own: a source change
# rebuilds only the layers below. One stage on purpose: hack/realimages.sh prunes dangling images
# after each build, and an earlier stage's layers would go with them (rebuilt every time).
COPY pyproject.toml images/requirements.py /tmp/kuberl-deps/
RUN python -m venv /opt/kuberl \
    && python /tmp/kuberl-deps/requirements.py /tmp/kuberl-deps/pyproject.toml operator \
        >/tmp/kuberl-deps/requirements.txt \
    && /opt/kuberl/bin/pip install --no-cache-dir -r /tmp/kuberl-deps/requirements.txt \
    && rm -rf /tmp/kuberl-deps

# setuptools finds packages under all four roots, so all four are copied; every requirement is
# satisfied above, so this installs kuberl alone (a layer of megabytes), and kuberl_runtime is
# inert here.
COPY pyproject.toml README.md /src/
COPY api /src/api
COPY cli /src/cli
COPY operator /src/operator
COPY runtime /src/runtime
RUN /opt/kuberl/bin/pip install --no-cache-dir "/src[operator]" \
    && rm -rf /src
ENV PATH=/opt/kuberl/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# Metrics, liveness.
EXPOSE 8080 8081
ENTRYPOINT ["kuberl", "operator"]
