"""What the checkpoint tests share: the single-rank RankInfo and a manager on tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuberl_runtime.checkpoint.manager import CheckpointManager
from kuberl_runtime.distributed import RankInfo

MAIN = RankInfo(rank=0, world_size=1, local_rank=0)


@pytest.fixture
def manager(tmp_path: Path) -> CheckpointManager:
    """A single-rank manager over ``tmp_path``: every module's model, optimizer and extra."""
    return CheckpointManager(tmp_path, MAIN)
