"""Checkpoints mirrored to object storage (``trainer.default_hdfs_dir``: s3://, gs://, hdfs://).

After the local step directory is complete (renamed into place), every rank uploads the files it
owns (``manifest.owner``) to ``<mirror>/global_step_N/`` with bounded retries, the shard lists are
gathered, and rank 0 writes ``kuberl-manifest.json`` last. Only a step whose manifest exists and
whose every listed object has the listed size is complete: an upload killed half way leaves a
step without a manifest, which resume ignores and the next retention pass removes. Retention
(``max_ckpt_to_keep``) applies to the mirror as to the local directory.

A run that finds no newer local checkpoint than the mirror's newest complete one downloads it
(each node's local rank 0, digests checked) before resuming: a fresh node resumes from the store.
A denied request (wrong or missing credentials) is not retried: it fails the run at once with an
error naming the credentials Secret (``KUBERL_STORAGE_SECRET``), never a credential's value.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kuberl_api.storage import CREDENTIALS_SECRET_ENV, SCHEMES, scheme_of, strip_protocol
from kuberl_runtime.checkpoint.manifest import (
    MANIFEST_FILE,
    Manifest,
    ManifestError,
    Shard,
    owned_shards,
    sha256_of,
)
from kuberl_runtime.distributed import RankInfo, all_gather_objects, barrier
from kuberl_runtime.faults import maybe_crash

logger = logging.getLogger(__name__)

_STEP = re.compile(r"^global_step_(\d+)$")
ATTEMPTS = 4
T = TypeVar("T")


class StorageAccessError(RuntimeError):
    """The object store refused the credentials, or the filesystem for a scheme is missing: a
    configuration error, which a retry cannot mend."""


class StorageTransferError(RuntimeError):
    """An upload or download that still failed after its retries, or a corrupt download."""


def _raise_first(errors: list[tuple[bool, str] | None], what: str) -> None:
    """Every rank's outcome gathered: raise the first failure, a denial as StorageAccessError."""
    failed = [e for e in errors if e]
    if not failed:
        return
    denied, message = failed[0]
    raise (StorageAccessError if denied else StorageTransferError)(f"{what}: {message}")


def credentials_hint() -> str:
    secret = os.environ.get(CREDENTIALS_SECRET_ENV)
    if secret:
        return f"check the keys of Secret {secret!r} (spec.storage.credentials.secretRef)"
    return (
        "set spec.storage.credentials.secretRef to a Secret holding AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or export them where kuberl train runs)"
    )


def open_filesystem(url: str) -> Any:
    """The fsspec filesystem for ``url``, configured from the environment (credentials Secret)."""
    import fsspec

    scheme = SCHEMES[scheme_of(url)]
    options: dict[str, Any] = {}
    if scheme.protocol == "file":
        options = {"auto_mkdir": True}  # a local copy creates its directories as it goes
    elif scheme.protocol == "s3":
        env = os.environ
        options = {
            "key": env.get("AWS_ACCESS_KEY_ID"),
            "secret": env.get("AWS_SECRET_ACCESS_KEY"),
            "endpoint_url": env.get("AWS_ENDPOINT_URL") or None,
            "client_kwargs": {"region_name": env.get("AWS_REGION") or "us-east-1"},
            # botocore's own retries stay short: denied requests must fail fast.
            "config_kwargs": {"retries": {"max_attempts": 2}},
            "skip_instance_cache": True,
        }
    try:
        return fsspec.filesystem(scheme.protocol, **options)
    except ImportError as err:
        raise StorageAccessError(
            f"{url}: reading {scheme_of(url)}:// needs the Python package {scheme.package!r} "
            f"in the training image ({err})"
        ) from err


def with_retries(what: str, action: Callable[[], T]) -> T:
    """``action`` with up to ATTEMPTS tries and exponential backoff; a denial is never retried."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return action()
        except PermissionError as err:
            raise StorageAccessError(
                f"{what}: access denied ({err}); {credentials_hint()}"
            ) from err
        except FileNotFoundError:
            raise  # an answer, not a failure
        except (OSError, TimeoutError) as err:
            if attempt == ATTEMPTS:
                raise
            delay = 0.5 * 2 ** (attempt - 1)
            logger.warning("%s failed (%s); retry %d in %.1fs", what, err, attempt, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


class CheckpointMirror:
    def __init__(self, url: str, ranks: RankInfo, max_to_keep: int | None = None) -> None:
        self.url = url.rstrip("/")
        self.ranks = ranks
        self.max_to_keep = max_to_keep
        self.fs = open_filesystem(url)
        # the path as the filesystem lists it (a local ~/ is expanded there)
        self.root = os.path.expanduser(strip_protocol(self.url))

    def step_url(self, step: int) -> str:
        return f"{self.root}/global_step_{step}"

    # ---- access ----------------------------------------------------------------------------
    def check_access(self) -> None:
        """List the mirror once at start: wrong credentials fail before any training."""
        with_retries(f"listing {self.url}", lambda: self._listing())

    def _listing(self) -> list[str]:
        """Every object under the mirror, relative to it. Objects, not prefixes: some stores
        (SeaweedFS) keep listing a prefix as a directory once its last object is gone."""
        self.fs.invalidate_cache()
        try:
            found = self.fs.find(self.root)
        except FileNotFoundError:
            return []
        return [p[len(self.root) + 1 :] for p in found if p.startswith(self.root + "/")]

    # ---- upload ----------------------------------------------------------------------------
    def upload(self, step_dir: Path, step: int) -> None:
        """Collective: every rank uploads its shards, then rank 0 writes the manifest."""
        self.upload_step(step_dir, step, all_gather_objects)
        barrier()

    def upload_step(
        self,
        step_dir: Path,
        step: int,
        gather: Callable[[Any], list[Any]],
        before_gather: Callable[[], None] | None = None,
    ) -> None:
        """``upload`` through ``gather`` (the default group's all-gather, or the upload
        thread's own group: ``checkpoint/uploads.py``); ``before_gather`` runs once this rank's
        shards are on the store."""
        error: tuple[bool, str] | None = None
        shards: list[Shard] = []
        try:
            if not step_dir.is_dir():  # else its shards would be missing from the manifest
                raise FileNotFoundError(
                    f"{step_dir} is not on this rank's disk: every rank must see the step rank 0 "
                    "published (af_output_dir on a volume all nodes share)"
                )
            shards = owned_shards(step_dir, self.ranks.rank)
            for shard in shards:
                self._put(step_dir / shard.path, f"{self.step_url(step)}/{shard.path}")
                maybe_crash("checkpoint_upload", step)
        except (StorageAccessError, OSError) as err:
            error = (isinstance(err, StorageAccessError), f"rank {self.ranks.rank}: {err}")
        if before_gather is not None:
            before_gather()
        gathered = gather((error, shards))
        _raise_first([e for e, _ in gathered], f"uploading step {step} to {self.url}")
        if self.ranks.is_main:
            listed = tuple(s for _, part in gathered for s in part)
            manifest = Manifest(step, self.ranks.world_size, listed)
            target = f"{self.step_url(step)}/{MANIFEST_FILE}"
            record = manifest.to_json().encode()
            with_retries(f"writing {target}", lambda: self.fs.pipe(target, record))
            logger.info("uploaded step %d to %s (%d shards)", step, self.url, len(listed))
            self._prune(keep_step=step)

    def _put(self, local: Path, remote: str) -> None:
        with_retries(f"uploading {local.name} to {remote}", lambda: self.fs.put(str(local), remote))

    # ---- what the mirror holds -------------------------------------------------------------
    def manifest(self, step: int) -> Manifest | None:
        """The step's manifest when the step is complete (every shard there, sizes equal)."""
        path = f"{self.step_url(step)}/{MANIFEST_FILE}"
        try:
            manifest = Manifest.from_json(with_retries(f"reading {path}", lambda: self._cat(path)))
        except (FileNotFoundError, ManifestError) as err:
            logger.info("step %d on %s is incomplete: %s", step, self.url, err)
            return None
        for shard in manifest.shards:
            size = self._size(f"{self.step_url(step)}/{shard.path}")
            if size != shard.size:
                logger.warning(
                    "step %d: %s is %s bytes, manifest says %d", step, shard.path, size, shard.size
                )
                return None
        return manifest

    def _cat(self, path: str) -> str:
        return self.fs.cat_file(path).decode()

    def _size(self, path: str) -> int | None:
        try:
            return int(with_retries(f"stat {path}", lambda: self.fs.info(path))["size"])
        except FileNotFoundError:
            return None

    def steps(self) -> list[int]:
        """Every step holding an object on the mirror, complete or not, oldest first."""
        tops = {path.split("/", 1)[0] for path in with_retries(self.url, self._listing)}
        found = (_STEP.match(name) for name in tops)
        return sorted(int(m.group(1)) for m in found if m)

    def latest_complete(self) -> tuple[int, Manifest] | None:
        for step in reversed(self.steps()):
            manifest = self.manifest(step)
            if manifest is not None:
                return step, manifest
        return None

    # ---- download --------------------------------------------------------------------------
    def download(self, step: int, manifest: Manifest, target: Path) -> None:
        """Collective: each node's local rank 0 fetches the step into ``target`` (skipped when a
        directory is already there), checking every digest; then all ranks wait."""
        error: tuple[bool, str] | None = None
        if self.ranks.local_rank == 0 and not target.is_dir():
            try:
                self._fetch(step, manifest, target)
            except (StorageAccessError, OSError, ValueError) as err:
                error = (isinstance(err, StorageAccessError), f"rank {self.ranks.rank}: {err}")
        _raise_first(all_gather_objects(error), f"downloading step {step} from {self.url}")
        barrier()

    def _fetch(self, step: int, manifest: Manifest, target: Path) -> None:
        tmp = target.with_name(f".tmp-download-{target.name}-{self.ranks.rank}")
        shutil.rmtree(tmp, ignore_errors=True)
        for shard in manifest.shards:
            local = tmp / shard.path
            local.parent.mkdir(parents=True, exist_ok=True)
            remote = f"{self.step_url(step)}/{shard.path}"
            with_retries(
                f"downloading {remote}", lambda r=remote, dst=local: self.fs.get(r, str(dst))
            )
            _check_digest(local, shard)
        if target.exists():  # another node's leader on a shared disk was first
            shutil.rmtree(tmp, ignore_errors=True)
            return
        os.replace(tmp, target)
        logger.info("downloaded step %d from %s into %s", step, self.url, target)

    # ---- retention -------------------------------------------------------------------------
    def _prune(self, keep_step: int) -> None:
        """Drop steps older than the newest complete one without a manifest (interrupted
        uploads), then the oldest complete ones beyond max_to_keep."""
        older = [s for s in self.steps() if s < keep_step]
        complete = [s for s in older if self.manifest(s) is not None]
        doomed = [s for s in older if s not in complete]
        if self.max_to_keep:
            doomed += complete[: max(0, len(complete) + 1 - self.max_to_keep)]
        for step in sorted(doomed):
            logger.info("retention: removing %s/global_step_%d", self.url, step)
            with_retries(f"removing step {step}", lambda s=step: self._remove(s))

    def _remove(self, step: int) -> None:
        # The manifest first: a removal cut short leaves an incomplete step, never a damaged
        # complete one.
        for path, recursive in (
            (f"{self.step_url(step)}/{MANIFEST_FILE}", False),
            (self.step_url(step), True),
        ):
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm(path, recursive=recursive)


def _check_digest(path: Path, shard: Shard) -> None:
    if path.stat().st_size != shard.size or sha256_of(path) != shard.sha256:
        raise ValueError(f"{shard.path} does not match the manifest's size and sha256")
