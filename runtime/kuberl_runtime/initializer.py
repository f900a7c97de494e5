"""The model/data initializer: remote inputs copied into the input cache before any rank reads.

Every rank calls ``initialize_inputs`` first thing (``launcher/worker.py``), before the memory
check and the process group. For each URL of the plan (``paths.remote_inputs``) the ranks of a
node take one file lock in the cache; the first copies every object under the URL, the others
then find the copy current and read it. On a cache shared by several nodes the same lock makes
it one copy in all, where the filesystem honours ``flock`` (NFSv4 does); where it does not, each
node's copy still lands whole (a rename), never half written.

An object is copied to ``.state/<path>.partial``, resumed from its size when an earlier copy of
the same object (ETag, else size and modification time) was cut short, checked for its size,
renamed into place, and only then recorded (``.state/<path>.json``): a partial file is never
read. A copy whose record names the object the store lists now is not copied again. Progress is
logged and, in a cluster, sent as a heartbeat on the job's status (``status.progress``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kuberl_api.plan.sections import RemoteInputPlan
from kuberl_api.storage import scheme_of, strip_protocol
from kuberl_runtime.checkpoint.remote import open_filesystem, with_retries

logger = logging.getLogger(__name__)

CHUNK = 8 << 20
LOG_EVERY_S = 10.0
STATE_DIR = ".state"
Heartbeat = Callable[[int, int], None]
"""Called with (bytes copied, bytes to copy) as a copy goes on."""
P = TypeVar("P")


@dataclass(frozen=True)
class RemoteObject:
    key: str
    """The object's path as the filesystem names it (bucket/key)."""
    relative: str
    """Its path under the URL ("" when the URL is the object itself)."""
    size: int
    identity: str
    """ETag when the store gives one, else size and modification time."""


def initialize_inputs(plan: P, heartbeat: Heartbeat | None = None) -> P:
    """``plan`` (a RunPlan or SFTPlan) once every remote input is in the cache, reading the
    cached copies in place of the URLs."""
    paths = plan.paths  # type: ignore[attr-defined]
    cache = Path(paths.input_cache_dir)
    for item in paths.remote_inputs:
        if scheme_of(item.url) != "file":
            fetch_input(item, cache, heartbeat)
    return localized(plan, paths.remote_inputs)


def fetch_input(item: RemoteInputPlan, cache: Path, heartbeat: Heartbeat | None = None) -> int:
    """Make ``item.local_path`` a whole copy of ``item.url``; returns the bytes transferred."""
    state = cache / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    lock = state / (hashlib.sha256(item.url.encode()).hexdigest()[:32] + ".lock")
    with _locked(lock):
        fs = open_filesystem(item.url)
        objects = _listing(fs, item.url)
        stale = [o for o in objects if not _current(o, item, cache)]
        total = sum(o.size for o in stale)
        if not stale:
            logger.info("initializer: %s is in the cache (%s)", item.url, item.local_path)
            return 0
        logger.info(
            "initializer: copying %s (%d of %d objects, %s) into %s",
            item.url,
            len(stale),
            len(objects),
            _size(total),
            item.local_path,
        )
        progress = _Progress(item.url, total, heartbeat)
        for obj in stale:
            _copy(fs, obj, item, cache, progress)
        progress.report(force=True)
        return progress.transferred


def localized(plan: P, inputs: list[RemoteInputPlan]) -> P:
    """The plan with every input URL replaced by its local copy's path (model, data, critic and
    reward model sections, trainer.resume_from_path; the plan's record of the source config
    keeps the URLs)."""
    if not inputs:
        return plan
    local = {item.url: item.local_path for item in inputs}

    def swap(node: Any) -> Any:
        if isinstance(node, str):
            return local.get(node, node)
        if isinstance(node, list):
            return [swap(v) for v in node]
        if isinstance(node, dict):
            return {k: swap(v) for k, v in node.items()}
        return node

    document = json.loads(plan.model_dump_json())  # type: ignore[attr-defined]
    for section in ("model", "data", "critic", "reward_model"):
        if section in document:
            document[section] = swap(document[section])
    trainer = document["trainer"]  # a resume_from_path URL: the uploaded step's copy
    trainer["resume_from_path"] = swap(trainer["resume_from_path"])
    return type(plan).model_validate_json(json.dumps(document))  # type: ignore[attr-defined]


# ---- listing -----------------------------------------------------------------------------------
def _listing(fs: Any, url: str) -> list[RemoteObject]:
    root = strip_protocol(url).rstrip("/")

    def list_objects() -> list[RemoteObject]:
        fs.invalidate_cache()
        info = fs.info(root)
        if info.get("type") != "directory":
            return [_object(root, "", info)]
        found = fs.find(root, detail=True)
        return [
            _object(key, key[len(root) + 1 :], meta)
            for key, meta in sorted(found.items())
            if meta.get("type") != "directory" and key.startswith(root + "/")
        ]

    try:
        objects = with_retries(f"listing {url}", list_objects)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{url}: no such object or prefix on the store") from err
    if not objects:
        raise FileNotFoundError(f"{url}: the prefix holds no object")
    return objects


def _object(key: str, relative: str, meta: dict[str, Any]) -> RemoteObject:
    size = int(meta.get("size") or 0)
    etag = meta.get("ETag") or meta.get("etag")
    if etag:
        identity = f"etag:{str(etag).strip(chr(34))}"
    else:
        mtime = meta.get("LastModified") or meta.get("mtime") or meta.get("last_modified")
        identity = f"size:{size}:mtime:{mtime}"
    return RemoteObject(key, relative, size, identity)


# ---- the cache ---------------------------------------------------------------------------------
def _target(item: RemoteInputPlan, obj: RemoteObject) -> Path:
    return Path(item.local_path, obj.relative) if obj.relative else Path(item.local_path)


def _state(item: RemoteInputPlan, obj: RemoteObject, cache: Path, suffix: str) -> Path:
    relative = _target(item, obj).relative_to(cache)
    return cache / STATE_DIR / f"{relative}{suffix}"


def _current(obj: RemoteObject, item: RemoteInputPlan, cache: Path) -> bool:
    target, record = _target(item, obj), _state(item, obj, cache, ".json")
    if not target.is_file() or not record.is_file():
        return False
    try:
        saved = json.loads(record.read_text())
    except ValueError:
        return False
    return saved.get("identity") == obj.identity and target.stat().st_size == obj.size


def _copy(
    fs: Any, obj: RemoteObject, item: RemoteInputPlan, cache: Path, progress: _Progress
) -> None:
    target, record = _target(item, obj), _state(item, obj, cache, ".json")
    partial, partial_of = (_state(item, obj, cache, s) for s in (".partial", ".partial.json"))
    partial.parent.mkdir(parents=True, exist_ok=True)
    offset = _resumable(partial, partial_of, obj)
    if offset:
        logger.info("initializer: resuming %s at %s", obj.key, _size(offset))
    else:
        partial.write_bytes(b"")
        partial_of.write_text(json.dumps({"identity": obj.identity}))
    progress.done += offset
    with_retries(f"downloading {obj.key}", lambda: _append(fs, obj, partial, progress))
    copied = partial.stat().st_size
    if copied != obj.size:
        raise OSError(f"{obj.key}: copied {copied} bytes, the store lists {obj.size}")
    record.unlink(missing_ok=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(partial, target)
    record.write_text(json.dumps({"identity": obj.identity, "size": obj.size, "key": obj.key}))
    partial_of.unlink(missing_ok=True)


def _resumable(partial: Path, partial_of: Path, obj: RemoteObject) -> int:
    """Bytes of an earlier copy of the same object to go on from (0: start again)."""
    if not partial.is_file() or not partial_of.is_file():
        return 0
    try:
        same = json.loads(partial_of.read_text()).get("identity") == obj.identity
    except ValueError:
        return 0
    size = partial.stat().st_size
    return size if same and size <= obj.size else 0


def _append(fs: Any, obj: RemoteObject, partial: Path, progress: _Progress) -> None:
    """Copy from the partial file's end (a retry goes on from where the last try stopped)."""
    start = partial.stat().st_size
    if start >= obj.size:
        return
    with fs.open(obj.key, "rb", block_size=CHUNK) as src, partial.open("ab") as dst:
        src.seek(start)
        while chunk := src.read(CHUNK):
            dst.write(chunk)
            dst.flush()
            progress.add(len(chunk))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        waited = time.monotonic()
        fcntl.flock(handle, fcntl.LOCK_EX)
        if time.monotonic() - waited > 1:
            logger.info(
                "initializer: waited %.0fs for another rank's copy", time.monotonic() - waited
            )
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _Progress:
    def __init__(self, url: str, total: int, heartbeat: Heartbeat | None) -> None:
        self.url, self.total, self.heartbeat = url, total, heartbeat
        self.done = 0
        """Bytes in the cache's copies so far (a resumed copy's earlier part included)."""
        self.transferred = 0
        self._last = time.monotonic()

    def add(self, count: int) -> None:
        self.done += count
        self.transferred += count
        self.report()

    def report(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < LOG_EVERY_S:
            return
        self._last = now
        percent = 100 * self.done // self.total if self.total else 100
        logger.info(
            "initializer: %s %s of %s (%d%%)",
            self.url,
            _size(self.done),
            _size(self.total),
            percent,
        )
        if self.heartbeat is not None:
            self.heartbeat(self.done, self.total)


def _size(count: int) -> str:
    return f"{count / (1 << 20):.1f} MiB"
