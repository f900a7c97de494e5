#!/usr/bin/env bash
# Install the Debian packages the real node and the local image builds need: containerd and runc
# (the node), the CNI plugins (loopback only), mmdebstrap + podman (images with no registry),
# gcc's static libc (the pause binary) and iptables (teardown checks that no chain is left).
# A no-op when all are present; needs root and apt (Debian/Ubuntu). Called by `make test`.
set -euo pipefail

PACKAGES=(containerd runc containernetworking-plugins mmdebstrap podman gcc libc6-dev iptables)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("${pkg}")
done
((${#missing[@]})) || exit 0
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
  echo "realnode-deps: missing ${missing[*]}; install them as root with apt-get" \
    "(without them the real-pod tier cannot run)" >&2
  exit 1
fi
echo "realnode-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
