"""Checkpoint uploads that overlap training: one upload in flight per rank, on a thread.

``save`` writes the step to the local disk (``CheckpointManager``), then hands it to
``AsyncUploads.start`` and returns: the next training step runs while the step's shards go to the
store. The queue is bounded to the one upload in flight: the next ``start`` (the next save) and
``finish`` (the end of the run, a stop on SIGTERM) first wait for it and raise its failure, so
at most one step is being uploaded, the upload streams from the local step directory (no copy in
memory), and local retention never removes a step still being read.

The upload is collective (every rank's shard list is gathered, rank 0 writes the manifest last),
but it must not use the default process group from a second thread while training uses it: the
threads gather through a process group of their own (gloo, CPU), created by every rank when the
manager is built. The threads of all ranks call it in the same order, one step after another.

Test hook: ``KUBERL_FAULT_POINT=checkpoint_upload_hold`` holds each rank's upload after its
shards are on the store, until the run next waits for it (the next save, or the end): the
manifest is then written only after a later step trained, which a blocking upload could never
do (it would wait for itself).
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
from pathlib import Path
from typing import Any

import torch.distributed as dist

from kuberl_runtime.checkpoint.remote import CheckpointMirror
from kuberl_runtime.faults import FAULT_POINT_ENV

logger = logging.getLogger(__name__)

HOLD_POINT = "checkpoint_upload_hold"
GROUP_TIMEOUT = datetime.timedelta(hours=6)
"""How long a rank's upload thread waits for the others' shard lists (slow stores included)."""


class AsyncUploads:
    def __init__(self, mirror: CheckpointMirror) -> None:
        self.mirror = mirror
        self._group = _upload_group()
        self._thread: threading.Thread | None = None
        self._step: int | None = None
        self._error: BaseException | None = None
        self._released = threading.Event()

    @property
    def in_flight(self) -> int | None:
        """The step being uploaded, if any."""
        thread = self._thread
        return self._step if thread is not None and thread.is_alive() else None

    def start(self, step_dir: Path, step: int) -> None:
        """Upload ``step_dir`` in the background, once the previous upload is done."""
        self.wait(f"saved step {step}")
        self._released.clear()
        self._step = step
        self._thread = threading.Thread(
            target=self._run, args=(step_dir, step), name=f"kuberl-upload-{step}", daemon=True
        )
        self._thread.start()

    def wait(self, why: str) -> None:
        """Wait for the upload in flight; raise its failure (every rank raises the same)."""
        thread, step = self._thread, self._step
        if thread is None:
            return
        if thread.is_alive():
            logger.info("%s while the upload of step %d is in flight; waiting for it", why, step)
        self._released.set()
        thread.join()
        self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self, step_dir: Path, step: int) -> None:
        try:
            self.mirror.upload_step(step_dir, step, self._gather, self._hold)
        except BaseException as err:  # reported by wait(), in the training thread
            self._error = err

    def _gather(self, obj: Any) -> list[Any]:
        if self._group is None:
            return [obj]
        out: list[Any] = [None] * dist.get_world_size(self._group)
        dist.all_gather_object(out, obj, group=self._group)
        return out

    def _hold(self) -> None:
        if os.environ.get(FAULT_POINT_ENV) == HOLD_POINT:
            logger.info("upload of step %s: holding until the run waits for it", self._step)
            self._released.wait()


def _upload_group() -> Any:
    """Every rank's own gloo group for the upload threads (None: one rank, nothing to gather)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return None
    return dist.new_group(backend="gloo", timeout=GROUP_TIMEOUT)
