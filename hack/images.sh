#!/usr/bin/env bash
# Build the kuberl container images with the versions pinned in images/versions.env.
#
#   bash hack/images.sh                        # operator, runtime-cpu, runtime-cuda, runtime-npu
#   bash hack/images.sh operator runtime-cuda  # only these
#   bash hack/images.sh --dry-run              # print the docker commands, run nothing
#
# Environment: REGISTRY (default ghcr.io/kuberl), TAG (default KUBERL_VERSION from
# versions.env), DOCKER (default docker), PLATFORM (e.g. linux/arm64 for Ascend's Kunpeng
# hosts; default: the engine's), PUSH=1 to push after building.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSIONS="${ROOT}/images/versions.env"
ALL_IMAGES=(operator runtime-cpu runtime-cuda runtime-npu)

log() { printf 'images: %s\n' "$*" >&2; }

# KEY=VALUE lines of versions.env (comments and blanks skipped), without sourcing the file.
read_versions() {
  grep -E '^[A-Z][A-Z0-9_]*=' "${VERSIONS}"
}

main() {
  local dry_run=0
  local -a images=()
  local arg
  for arg in "$@"; do
    case "${arg}" in
      --dry-run) dry_run=1 ;;
      -h | --help)
        sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        return 0
        ;;
      *)
        [[ -f "${ROOT}/images/${arg}.Dockerfile" ]] || {
          log "unknown image '${arg}'; known: ${ALL_IMAGES[*]}"
          return 2
        }
        images+=("${arg}")
        ;;
    esac
  done
  ((${#images[@]})) || images=("${ALL_IMAGES[@]}")

  local docker="${DOCKER:-docker}"
  if ((!dry_run)) && ! "${docker}" info >/dev/null 2>&1; then
    log "no Docker engine is reachable ('${docker} info' failed), so no image was built."
    log "Run this where a Docker engine (or DOCKER=podman) is available; '--dry-run' prints the commands."
    return 1
  fi

  local version
  version="$(read_versions | sed -n 's/^KUBERL_VERSION=//p')"
  local registry="${REGISTRY:-ghcr.io/kuberl}" tag="${TAG:-${version}}"

  local name
  for name in "${images[@]}"; do
    local ref="${registry}/${name}:${tag}"
    local dockerfile="${ROOT}/images/${name}.Dockerfile"
    # Only the ARGs this Dockerfile declares, so docker has no unused build-arg to warn about.
    local -a build_args=()
    local line
    while IFS= read -r line; do
      grep -qE "^ARG ${line%%=*}(=|$)" "${dockerfile}" && build_args+=(--build-arg "${line}")
    done < <(read_versions)
    local -a cmd=("${docker}" build --file "${dockerfile}" --tag "${ref}")
    [[ -n "${PLATFORM:-}" ]] && cmd+=(--platform "${PLATFORM}")
    cmd+=("${build_args[@]}" "${ROOT}")
    if ((dry_run)); then
      printf '%q ' "${cmd[@]}"
      printf '\n'
      continue
    fi
    log "building ${ref}"
    "${cmd[@]}"
    if [[ "${PUSH:-0}" == 1 ]]; then
      "${docker}" push "${ref}"
    fi
  done
}

main "$@"
