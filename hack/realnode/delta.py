"""The real node's images as OCI image layouts: import only the blobs a store lacks, and prune.

hack/realimages.sh saves each image as an OCI layout with uncompressed layers (`podman save
--uncompressed --format oci-dir`) into the previous layout of that image, so podman writes only
the layers that changed: for runtime-cpu (8 GB) a source change is its top megabytes. Importing
works the same way: `ctr images import` of a docker-archive reads, hashes and writes every layer
again before it finds the store already holds it (minutes for runtime-cpu); the layout streamed
as a tar holding only the blobs the store lacks imports in seconds, and containerd takes the
rest from its own store. An uncompressed layer's digest is its diff ID either way.

    python3 hack/realnode/delta.py prune LAYOUT   # drop blobs the layout's index no longer reaches
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

IMAGE_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"


def referenced(layout: Path) -> set[str]:
    """The digests of every blob the layout's index reaches: manifests, configs, layers."""
    index = json.loads((layout / "index.json").read_text())
    found: set[str] = set()
    for descriptor in index["manifests"]:
        manifest = json.loads(_blob(layout, descriptor["digest"]).read_text())
        found.add(descriptor["digest"])
        found.add(manifest["config"]["digest"])
        found.update(layer["digest"] for layer in manifest["layers"])
    return found


def prune(layout: Path) -> int:
    """Remove the blobs no manifest of the layout reaches; the bytes freed."""
    keep = referenced(layout)
    freed = 0
    for path in (layout / "blobs" / "sha256").iterdir():
        if f"sha256:{path.name}" not in keep:
            freed += path.stat().st_size
            path.unlink()
    return freed


def present_digests(ctr: list[str]) -> set[str]:
    """The blobs the store (`ctr` is its command prefix, namespace included) already holds."""
    listing = subprocess.run([*ctr, "content", "ls", "-q"], capture_output=True, check=True)
    return set(listing.stdout.decode().split())


def import_missing(ctr: list[str], layout: Path) -> int:
    """Import the images of `layout`, streaming only the blobs the store lacks; the bytes sent.
    Each image keeps its name: containerd reads it from `io.containerd.image.name`."""
    index = json.loads((layout / "index.json").read_text())
    for descriptor in index["manifests"]:
        annotations = descriptor.setdefault("annotations", {})
        annotations[IMAGE_NAME] = annotations[REF_NAME]
    missing = sorted(referenced(layout) - present_digests(ctr))
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            [*ctr, "images", "import", "--snapshotter", "overlayfs", "-"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        sent = _stream(process, layout, index, missing)
        if process.wait() != 0:
            err.seek(0)
            reason = err.read().decode(errors="replace")
            raise RuntimeError(f"ctr images import - ({layout}): {reason}")
    return sent


def _stream(
    process: subprocess.Popen[bytes], layout: Path, index: dict[str, Any], missing: list[str]
) -> int:
    """Write the layout's tar (the index as given, only the `missing` blobs) to the process."""
    assert process.stdin is not None
    sent = 0
    # A BrokenPipeError: ctr stopped reading, and its own error follows.
    with (
        contextlib.suppress(BrokenPipeError),
        process.stdin,
        tarfile.open(fileobj=process.stdin, mode="w|") as out,
    ):
        out.add(layout / "oci-layout", "oci-layout")
        _add_bytes(out, "index.json", json.dumps(index).encode())
        for digest in missing:
            path = _blob(layout, digest)
            out.add(path, str(path.relative_to(layout)))
            sent += path.stat().st_size
    return sent


def _blob(layout: Path, digest: str) -> Path:
    algorithm, hexdigest = digest.split(":", 1)
    return layout / "blobs" / algorithm / hexdigest


def _add_bytes(out: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o444
    out.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "prune":
        sys.exit("usage: delta.py prune LAYOUT")
    print(f"pruned {prune(Path(sys.argv[2])) // 2**20} MiB from {sys.argv[2]}", file=sys.stderr)
