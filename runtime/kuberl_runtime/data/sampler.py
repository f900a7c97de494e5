"""Which prompts go into which training step, reproducibly and resumably.

Epoch e visits the samples in `permutation(seed, e)` order (identity when shuffle is off) and cuts
it into batches of `batch_size` prompts. The position is two integers (epoch, batches already
taken in that epoch) and is kept canonical: taking the last batch of an epoch moves the position to
(epoch + 1, 0). So a checkpoint written exactly at the end of an epoch resumes at the first batch
of the next epoch — never into an exhausted epoch that yields nothing (verl's end-of-epoch resume
bug).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from kuberl_runtime.data.errors import DataError

_STATE_VERSION = 1


class PromptBatchSampler:
    """Yields lists of dataset indices, one list per training step."""

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int | None = 0,
        drop_last: bool = True,
        batch_key: str = "data.train_batch_size",
    ) -> None:
        """``batch_key``: the config key that set ``batch_size``, for the error that names it."""
        if batch_size <= 0:
            raise DataError(f"batch size must be > 0, got {batch_size}")
        if drop_last and num_samples < batch_size:
            raise DataError(
                f"{batch_key}={batch_size} is larger than the dataset ({num_samples} "
                f"prompts after filtering), so no full batch exists; lower {batch_key} "
                "or add data"
            )
        if num_samples <= 0:
            raise DataError("the dataset is empty")
        self.num_samples = num_samples
        self.batch_size = batch_size
        self.shuffle = shuffle
        # verl's data.seed defaults to null; a fixed seed keeps every run resumable and repeatable.
        self.seed = 0 if seed is None else seed
        self.drop_last = drop_last
        self.epoch = 0
        self.batch_in_epoch = 0
        self._order_epoch = -1
        self._order = np.arange(0)

    @property
    def steps_per_epoch(self) -> int:
        if self.drop_last:
            return self.num_samples // self.batch_size
        return -(-self.num_samples // self.batch_size)

    @property
    def num_batches_taken(self) -> int:
        """Batches handed out since epoch 0 began (== training steps done, when one per step)."""
        return self.epoch * self.steps_per_epoch + self.batch_in_epoch

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The visiting order of epoch `epoch`; a fresh permutation per epoch from (seed, epoch)."""
        if not self.shuffle:
            return np.arange(self.num_samples)
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_samples)

    def next_batch(self) -> list[int]:
        """The next batch, crossing into the next epoch when this one is used up."""
        if self._order_epoch != self.epoch:
            self._order = self.epoch_order(self.epoch)
            self._order_epoch = self.epoch
        start = self.batch_in_epoch * self.batch_size
        batch = self._order[start : start + self.batch_size].tolist()
        self.batch_in_epoch += 1
        if self.batch_in_epoch == self.steps_per_epoch:
            self.epoch += 1
            self.batch_in_epoch = 0
        return batch

    def epoch_batches(self) -> Iterator[list[int]]:
        """The batches left in the current epoch (all of them at its start)."""
        epoch = self.epoch
        while self.epoch == epoch:
            yield self.next_batch()

    def __iter__(self) -> Iterator[list[int]]:
        """Endless: epochs follow one another; the trainer stops after its total steps."""
        while True:
            yield self.next_batch()

    def state_dict(self) -> dict[str, Any]:
        """A small JSON-able dict: the position plus what it is only valid for."""
        return {
            "version": _STATE_VERSION,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "num_samples": self.num_samples,
            "batch_size": self.batch_size,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "drop_last": self.drop_last,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a saved position; the next batch is the first one not yet taken."""
        mine = self.state_dict()
        for key in ("num_samples", "batch_size", "shuffle", "seed", "drop_last"):
            if state.get(key) != mine[key]:
                raise DataError(
                    f"cannot resume the data sampler: checkpoint has {key}={state.get(key)!r} but "
                    f"this run has {key}={mine[key]!r}; resume with the same data files and "
                    "data.* settings, or start without resume"
                )
        epoch, batch = int(state["epoch"]), int(state["batch_in_epoch"])
        if epoch < 0 or not 0 <= batch <= self.steps_per_epoch:
            raise DataError(f"corrupt sampler state: epoch={epoch}, batch_in_epoch={batch}")
        # States written by other tools may stop at (e, steps_per_epoch); that means (e + 1, 0).
        self.epoch, self.batch_in_epoch = divmod(
            epoch * self.steps_per_epoch + batch, self.steps_per_epoch
        )
