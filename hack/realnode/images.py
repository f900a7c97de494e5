"""The real node's images: built (or found in the cache) by hack/realimages.sh."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from testcluster.binaries import cache_root

log = logging.getLogger("realnode")

SCRIPT = Path(__file__).resolve().parent.parent / "realimages.sh"
# Image names in containerd, as the pods reference them (imagePullPolicy: Never).
REFERENCES = {
    "pause": "kuberl.local/pause:3.10",
    "operator": "kuberl.local/operator:0.1.0",
    "runtime-cpu": "kuberl.local/runtime-cpu:0.1.0",
}


# Set to 1: take each image's newest cached tarball as it is, even when the sources changed
# since it was built (several people editing one tree would otherwise rebuild runtime-cpu, minutes,
# before every run). The pods may then run older runtime code than the host's operator.
CACHED_ENV = "KUBERL_REALNODE_CACHED_IMAGES"


def build_images(names: tuple[str, ...] = tuple(REFERENCES)) -> dict[str, Path]:
    """Run hack/realimages.sh (a no-op per image whose inputs did not change) and return the
    tarballs of `names`. Its progress goes to this process's stderr."""
    if os.environ.get(CACHED_ENV) == "1" and (cached := _cached(names)):
        return cached
    result = subprocess.run(
        ["bash", str(SCRIPT), *names], stdout=subprocess.PIPE, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"hack/realimages.sh failed (exit {result.returncode}); see above")
    tarballs = dict(line.split("=", 1) for line in result.stdout.split() if "=" in line)
    return {name: Path(tarballs[name]) for name in names}


def _cached(names: tuple[str, ...]) -> dict[str, Path] | None:
    """The newest cached tarball of each of `names` (None when one has none)."""
    cache = cache_root() / "images"
    found = {}
    for name in names:
        tarballs = sorted(
            [*cache.glob(f"{name}-*.tar"), *cache.glob(f"{name}-*.oci")],
            key=lambda p: p.stat().st_mtime,
        )
        if not tarballs:
            return None
        log.warning(
            "%s=1: using %s as it is (not rebuilt for today's sources)", CACHED_ENV, tarballs[-1]
        )
        found[name] = tarballs[-1]
    return found
