"""The logs and the merged model of a run whose ``af_output_dir`` is a URL (``paths.output_url``).

The ranks write everything under the local staging directory the plan chose
(``paths.output_dir``, ``kuberl_api.storage.output_location``); checkpoints reach the URL as
they are saved, through the checkpoint mirror (``trainer.checkpoint_mirror`` is
``<url>/checkpoints``). At the end of the run (and before a stop on SIGTERM) rank 0 uploads
``huggingface/`` (the merged model, when exported) and ``logs/`` to ``<url>/huggingface`` and
``<url>/logs`` the same way: every file with retries, then a ``kuberl-manifest.json`` listing each
file's size and SHA-256, written last. A reader (the next job's ``model.path:
<url>/huggingface``) copies it through the initializer.
"""

from __future__ import annotations

import logging
from pathlib import Path

from kuberl_api.plan.sections import PathsPlan
from kuberl_api.storage import strip_protocol
from kuberl_runtime.checkpoint.manager import CheckpointManager
from kuberl_runtime.checkpoint.manifest import MANIFEST_FILE, Manifest, Shard, sha256_of
from kuberl_runtime.checkpoint.remote import open_filesystem, with_retries
from kuberl_runtime.distributed import RankInfo

logger = logging.getLogger(__name__)


class RunUploads:
    """What a run waits for before it reports its finish (or stops on SIGTERM): the last
    checkpoint's upload (``CheckpointManager.finish``; the mirrored manager's overlaps training),
    then, af_output_dir a URL, rank 0's upload of the merged model and the logs."""

    def __init__(self, checkpoints: CheckpointManager, paths: PathsPlan, ranks: RankInfo) -> None:
        self.checkpoints = checkpoints
        self.paths = paths
        self.ranks = ranks

    def finish(self, step: int) -> None:
        self.checkpoints.finish()
        upload_outputs(self.paths, self.ranks, step)


def upload_outputs(paths: PathsPlan, ranks: RankInfo, step: int) -> None:
    """Rank 0: the merged model and the logs to af_output_dir's URL (nothing without one)."""
    if not paths.output_url or not ranks.is_main:
        return
    fs = open_filesystem(paths.output_url)
    root = strip_protocol(paths.output_url)
    for name, local in (("huggingface", paths.hf_export_dir), ("logs", paths.logs_dir)):
        if Path(local).is_dir():
            count = upload_tree(fs, Path(local), f"{root}/{name}", step)
            logger.info("uploaded %s to %s/%s (%d files)", local, paths.output_url, name, count)


def upload_tree(fs: object, local: Path, remote: str, step: int) -> int:
    """Every file under ``local`` to ``remote``, then the manifest listing them, last."""
    shards = []
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        relative = path.relative_to(local).as_posix()
        if relative == MANIFEST_FILE:
            continue
        shards.append(Shard(relative, 0, path.stat().st_size, sha256_of(path)))
        target = f"{remote}/{relative}"
        with_retries(
            f"uploading {relative} to {target}",
            lambda src=str(path), dst=target: fs.put(src, dst),  # type: ignore[attr-defined]
        )
    record = Manifest(step, 1, tuple(shards)).to_json().encode()
    target = f"{remote}/{MANIFEST_FILE}"
    with_retries(f"writing {target}", lambda: fs.pipe(target, record))  # type: ignore[attr-defined]
    return len(shards)
