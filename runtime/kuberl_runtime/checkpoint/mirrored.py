"""A checkpoint manager whose steps are also kept on object storage (`trainer.default_hdfs_dir`).

Local writing, atomicity and local retention are `CheckpointManager`'s; this adds, as verl's
`default_hdfs_dir` does, a copy of every saved step under `<mirror>/global_step_N/` (see
`checkpoint/remote.py` for the upload, manifest and remote retention), and a resume that takes the
mirror's newest complete step when it is newer than anything on the local disk. Uploads overlap
training (`checkpoint/uploads.py`): `save` returns once the step is on the local disk, and
`finish` waits for the last upload before the run ends.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from kuberl_runtime.checkpoint.contents import Contents
from kuberl_runtime.checkpoint.manager import CheckpointManager, TrainState
from kuberl_runtime.checkpoint.remote import CheckpointMirror
from kuberl_runtime.checkpoint.uploads import AsyncUploads
from kuberl_runtime.distributed import RankInfo, barrier, broadcast_object

logger = logging.getLogger(__name__)


class MirroredCheckpointManager(CheckpointManager):
    def __init__(
        self,
        root: str | Path,
        ranks: RankInfo,
        mirror_url: str,
        max_to_keep: int | None = None,
        contents: dict[str, Contents] | None = None,
    ) -> None:
        super().__init__(root, ranks, max_to_keep, contents)
        self.mirror = CheckpointMirror(mirror_url, ranks, max_to_keep)
        self.uploads = AsyncUploads(self.mirror)

    def remove_partial_writes(self) -> None:
        super().remove_partial_writes()
        self.mirror.check_access()

    def save(self, step: int, state: TrainState, write_main_files: Any = None) -> Path:
        # The previous upload first: one in flight, and local retention below never removes a
        # step still being read.
        self.uploads.wait(f"saving step {step}")
        final = super().save(step, state, write_main_files)
        self.uploads.start(final, step)
        return final

    def finish(self) -> None:
        self.uploads.wait("the run is ending")
        barrier()

    def latest_step(self) -> int | None:
        """Collective: the newest of the local latest step and the mirror's newest complete
        one, downloading the latter when it is newer."""
        local = super().latest_step()
        remote = self.mirror.latest_complete() if self.ranks.is_main else None
        remote = broadcast_object(remote)
        if remote is None or (local is not None and local >= remote[0]):
            return local
        step, manifest = remote
        target = self.step_dir(step)
        if self.ranks.local_rank == 0 and target.exists():
            shutil.rmtree(target)  # not complete locally, or it would be the local latest
        barrier()
        logger.info(
            "the newest checkpoint is on %s: step %d (local: %s)", self.mirror.url, step, local
        )
        self.mirror.download(step, manifest, target)
        return step


def checkpoint_manager(
    root: str | Path,
    ranks: RankInfo,
    mirror_url: str,
    max_to_keep: int | None = None,
    contents: dict[str, Contents] | None = None,
) -> CheckpointManager:
    """A mirrored manager when the plan names a mirror (`trainer.checkpoint_mirror`), else local."""
    if mirror_url:
        return MirroredCheckpointManager(root, ranks, mirror_url, max_to_keep, contents)
    return CheckpointManager(root, ranks, max_to_keep, contents)
