"""hack/realnode/delta.py without a node: an OCI layout is pruned to the blobs its index reaches,
and its import streams only the blobs the store lacks, each image named for containerd. The
store is a stand-in `ctr` (a script answering `content ls -q` and recording the import's tar)."""

from __future__ import annotations

import hashlib
import json
import sys
import tarfile
from pathlib import Path

from realnode.delta import IMAGE_NAME, import_missing, prune

NAME = "kuberl.local/runtime-cpu:0.1.0"
FAKE_CTR = """import sys
from pathlib import Path
here = Path(sys.argv[0]).parent
if sys.argv[1:] == ["content", "ls", "-q"]:
    print((here / "present").read_text())
elif sys.argv[1:3] == ["images", "import"] and sys.argv[-1] == "-":
    (here / "imported.tar").write_bytes(sys.stdin.buffer.read())
else:
    sys.exit(f"unexpected: {sys.argv[1:]}")
"""


def blob(layout: Path, data: bytes) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def make_layout(layout: Path) -> dict[str, dict[str, object]]:
    """An image of two layers (`base`, `src`), a config, and one blob nothing reaches."""
    base, src = blob(layout, b"base layer" * 100), blob(layout, b"src layer")
    config = blob(layout, json.dumps({"rootfs": {"diff_ids": [base["digest"]]}}).encode())
    manifest = blob(layout, json.dumps({"config": config, "layers": [base, src]}).encode())
    stale = blob(layout, b"an older build's layer")
    annotations = {"org.opencontainers.image.ref.name": NAME}
    index = {"schemaVersion": 2, "manifests": [{**manifest, "annotations": annotations}]}
    (layout / "index.json").write_text(json.dumps(index))
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return {"base": base, "src": src, "config": config, "manifest": manifest, "stale": stale}


def test_prune_keeps_what_the_index_reaches(tmp_path: Path) -> None:
    blobs = make_layout(tmp_path)
    freed = prune(tmp_path)
    left = {f"sha256:{p.name}" for p in (tmp_path / "blobs" / "sha256").iterdir()}
    assert left == {blobs[k]["digest"] for k in ("base", "src", "config", "manifest")}
    assert freed == blobs["stale"]["size"]


def test_import_streams_only_the_blobs_the_store_lacks(tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    blobs = make_layout(layout)
    script = tmp_path / "ctr.py"
    script.write_text(FAKE_CTR)
    (tmp_path / "present").write_text(f"{blobs['base']['digest']}\n")
    sent = import_missing([sys.executable, str(script)], layout)

    with tarfile.open(tmp_path / "imported.tar") as archive:
        names = set(archive.getnames())
        index = json.load(archive.extractfile("index.json"))
    sent_keys = ("src", "config", "manifest")
    expected = {"blobs/sha256/" + str(blobs[k]["digest"]).split(":")[1] for k in sent_keys}
    assert names == {"oci-layout", "index.json", *expected}
    assert sent == sum(int(blobs[k]["size"]) for k in sent_keys)
    [entry] = index["manifests"]
    assert entry["annotations"][IMAGE_NAME] == NAME
    assert entry["digest"] == blobs["manifest"]["digest"]
