"""Checkpoints under `trainer.default_local_dir`, written so a crash at any instant is harmless.

Layout of one step (all ranks write their own shards):

    global_step_N/
      actor/            torch.distributed.checkpoint: {"model", "optim"} (sharded DTensors)
      actor/huggingface/  config + tokenizer (rank 0), for `kuberl export`
      critic/           same, when a critic is trained
      extra_state_rank_R.pt   lr schedulers, RNG states, KL controller (per rank)
      data.pt           the prompt sampler's position
      config.json       the resolved run config
      contents.json     what each module saved (`checkpoint.save_contents`)
      checkpoint_complete   written last: a step directory without it is never resumed from
    latest_checkpointed_iteration.txt   N, rewritten atomically after the rename

A step is written into `.tmp-global_step_N/`, fsynced (every file, then every directory), marked
complete, renamed to `global_step_N/` only when every rank has finished, and only then is the
tracker updated (fsync before each rename, and of the parent after it); leftovers of an interrupted
write are removed at start-up. On nodes that do not share `default_local_dir` (each pod its own
disk, checkpoints kept on object storage by the mirror), each node's local rank 0 makes and
publishes that node's own copy of the step, holding its ranks' shards. Retention removes whole
step directories, oldest first, never the newest. Every file read back is read with
`weights_only=True`: a checkpoint holds tensors and plain containers only, so whoever can write
the volume cannot run code in a resume.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from kuberl_runtime.checkpoint.contents import Contents, check_loadable, write_contents
from kuberl_runtime.checkpoint.durable import fsync_path, fsync_tree, write_atomically
from kuberl_runtime.distributed import RankInfo, barrier
from kuberl_runtime.faults import maybe_crash

logger = logging.getLogger(__name__)

TRACKER_FILE = "latest_checkpointed_iteration.txt"
COMPLETE_FILE = "checkpoint_complete"
_STEP_DIR = re.compile(r"^global_step_(\d+)$")
_TMP_PREFIX = ".tmp-"


@dataclass
class TrainState:
    """The model + optimizer pairs and the small per-rank and global state of a run."""

    modules: dict[str, tuple[nn.Module, torch.optim.Optimizer]]
    extra: dict[str, Any]
    """Per-rank picklable state (schedulers, RNG)."""
    data: dict[str, Any]
    """Global state rank 0 writes (sampler position)."""


class CheckpointManager:
    def __init__(
        self,
        root: str | Path,
        ranks: RankInfo,
        max_to_keep: int | None = None,
        contents: dict[str, Contents] | None = None,
    ) -> None:
        self.root = Path(root)
        self.ranks = ranks
        self.max_to_keep = max_to_keep
        self.contents = contents or {}
        """Per module; a module not named saves and loads model, optimizer and extra."""

    def contents_of(self, name: str) -> Contents:
        return self.contents.get(name, Contents())

    @property
    def _extra(self) -> Contents:
        # The per-rank extra state is the run's (schedulers of every module, RNG): the actor's
        # setting decides it.
        return self.contents_of("actor")

    def step_dir(self, step: int) -> Path:
        return self.root / f"global_step_{step}"

    def complete_steps(self) -> list[int]:
        if not self.root.is_dir():
            return []
        steps = [_STEP_DIR.match(p.name) for p in self.root.iterdir() if is_complete(p)]
        return sorted(int(m.group(1)) for m in steps if m)

    def latest_step(self) -> int | None:
        """The tracker's step when its directory exists, else the newest complete step."""
        tracker = self.root / TRACKER_FILE
        if tracker.is_file():
            text = tracker.read_text().strip()
            if text.isdigit() and is_complete(self.step_dir(int(text))):
                return int(text)
        steps = self.complete_steps()
        return steps[-1] if steps else None

    def remove_partial_writes(self) -> None:
        if self.ranks.local_rank == 0 and self.root.is_dir():  # every node's own disk
            for path in self.root.glob(f"{_TMP_PREFIX}global_step_*"):
                logger.warning("removing interrupted checkpoint write %s", path)
                shutil.rmtree(path, ignore_errors=True)
        barrier()

    def save(self, step: int, state: TrainState, write_main_files: Any = None) -> Path:
        """Write step `step`; `write_main_files(tmp_dir)` adds rank-0 files (config, tokenizer)."""
        tmp = self.root / f"{_TMP_PREFIX}global_step_{step}"
        if self.ranks.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        barrier()
        if self.ranks.local_rank == 0:  # a node whose disk is not rank 0's
            tmp.mkdir(parents=True, exist_ok=True)
        barrier()
        for name, (model, optimizer) in state.modules.items():
            payload = self._payload(name, model, optimizer, "save")
            if payload:
                dcp.save(payload, checkpoint_id=str(tmp / name))
        if self._extra.saves("extra"):
            _save_durably(state.extra, tmp / f"extra_state_rank_{self.ranks.rank}.pt")
        if self.ranks.is_main:
            torch.save(state.data, tmp / "data.pt")
            write_contents(tmp, {name: self.contents_of(name) for name in state.modules})
            if write_main_files is not None:
                write_main_files(tmp)
        barrier()
        maybe_crash("checkpoint_write", step)
        final = self.step_dir(step)
        if self.ranks.is_main:
            self._publish(tmp, final, step)
        barrier()
        if self.ranks.local_rank == 0 and tmp.is_dir():  # still there: not rank 0's disk
            self._publish(tmp, final, step)
        barrier()
        return final

    def _publish(self, tmp: Path, final: Path, step: int) -> None:
        """Rank 0, every rank's files written: make them durable, mark the step complete, rename
        it into place and point the tracker at it."""
        fsync_tree(tmp)  # DCP fsyncs its own shard files; this covers the rest and directories
        write_atomically(tmp / COMPLETE_FILE, f"{step}\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        fsync_path(self.root)
        write_atomically(self.root / TRACKER_FILE, f"{step}\n")
        self._prune(keep_step=step)

    def finish(self) -> None:
        """Called once the run's last checkpoint is saved: local saves are done already."""

    def load(self, step_dir: Path, state: TrainState) -> None:
        """Restore what `load_contents` asks for in place; fills `state.extra` and `state.data`.

        Parts not loaded keep their current values (`state.extra` stays empty without `extra`).
        """
        if not is_complete(step_dir):
            raise IncompleteCheckpoint(
                f"{step_dir} has no {COMPLETE_FILE}: its write was interrupted (or it is not a "
                "kuberl checkpoint); resume from another global_step_N directory"
            )
        for name, (model, optimizer) in state.modules.items():
            wanted = self.contents_of(name).load
            check_loadable(step_dir, name, wanted)
            loaded = self._payload(name, model, optimizer, "load")
            if not loaded:
                continue
            dcp.load(loaded, checkpoint_id=str(step_dir / name))
            if "model" in loaded:
                set_model_state_dict(model, loaded["model"])
            if "optim" in loaded:
                set_optimizer_state_dict(model, optimizer, loaded["optim"])
        if self._extra.loads("extra"):
            check_loadable(step_dir, "actor", ["extra"])
            state.extra = torch.load(self._extra_path(step_dir), weights_only=True)
        else:
            state.extra = {}
        state.data = torch.load(step_dir / "data.pt", weights_only=True)

    def _payload(
        self, name: str, model: nn.Module, optimizer: torch.optim.Optimizer, mode: str
    ) -> dict[str, Any]:
        contents = self.contents_of(name)
        wants = contents.saves if mode == "save" else contents.loads
        model_sd, optim_sd = get_state_dict(model, optimizer)
        payload: dict[str, Any] = {}
        if wants("model"):
            payload["model"] = model_sd
        if wants("optimizer"):
            payload["optim"] = optim_sd
        return payload

    def _extra_path(self, step_dir: Path) -> Path:
        extra_path = step_dir / f"extra_state_rank_{self.ranks.rank}.pt"
        if not extra_path.is_file():
            # Resuming on more ranks than wrote the checkpoint: DCP reshards the model and
            # optimizer; the newcomers take rank 0's schedulers and RNG.
            logger.warning("%s missing; using rank 0's extra state", extra_path.name)
            extra_path = step_dir / "extra_state_rank_0.pt"
        return extra_path

    def _prune(self, keep_step: int) -> None:
        if not self.max_to_keep:
            return
        older = [s for s in self.complete_steps() if s != keep_step]
        excess = len(older) + 1 - self.max_to_keep
        for step in older[: max(0, excess)]:
            logger.info("retention: removing %s", self.step_dir(step))
            shutil.rmtree(self.step_dir(step), ignore_errors=True)


class IncompleteCheckpoint(RuntimeError):
    """A step directory whose write never finished."""


def is_complete(step_dir: Path) -> bool:
    return (step_dir / COMPLETE_FILE).is_file()


def _save_durably(obj: Any, path: Path) -> None:
    with open(path, "wb") as handle:
        torch.save(obj, handle)
        handle.flush()
        os.fsync(handle.fileno())
