"""The real node's images: built (or found in the cache) by hack/realimages.sh."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

log = logging.getLogger("realnode")

SCRIPT = Path(__file__).resolve().parent.parent / "realimages.sh"
# Image names in containerd, as the pods reference them (imagePullPolicy: Never).
REFERENCES = {
    "pause": "kuberl.local/pause:3.10",
    "operator": "kuberl.local/operator:0.1.0",
    "runtime-cpu": "kuberl.local/runtime-cpu:0.1.0",
}


def build_images(names: tuple[str, ...] = tuple(REFERENCES)) -> dict[str, Path]:
    """Run hack/realimages.sh (a no-op per image whose inputs did not change) and return the
    tarballs of `names`. Its progress goes to this process's stderr."""
    result = subprocess.run(
        ["bash", str(SCRIPT), *names], stdout=subprocess.PIPE, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"hack/realimages.sh failed (exit {result.returncode}); see above")
    tarballs = dict(line.split("=", 1) for line in result.stdout.split() if "=" in line)
    return {name: Path(tarballs[name]) for name in names}
