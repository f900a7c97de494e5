"""Reward tests run offline; user reward files are written into tmp dirs by `write_reward_file`."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def write_reward_file(tmp_path: Path) -> Callable[[str], Path]:
    def write(source: str, name: str = "my_reward.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return path

    return write
