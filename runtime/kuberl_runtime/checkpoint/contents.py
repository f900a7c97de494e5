"""`checkpoint.save_contents` / `load_contents` (verl): which parts of a module a step holds.

`model` and `optimizer` are the sharded DCP state of the module; `extra` is the per-rank state
(lr schedulers, RNG, KL coefficient); `hf_model` writes full Hugging Face weights of the actor
into `actor/huggingface/` at every checkpoint (verl's per-checkpoint HF model). What a step saved
is recorded in its `contents.json`, so asking to load a part it does not hold is an error that
names both settings instead of a DCP key error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CONTENTS_FILE = "contents.json"
DEFAULT = ("model", "optimizer", "extra")


class CheckpointContentsError(Exception):
    """load_contents asks for a part the checkpoint did not save."""


@dataclass(frozen=True)
class Contents:
    save: tuple[str, ...] = DEFAULT
    load: tuple[str, ...] = DEFAULT

    def saves(self, part: str) -> bool:
        return part in self.save

    def loads(self, part: str) -> bool:
        return part in self.load


def write_contents(step_dir: Path, contents: Mapping[str, Contents]) -> None:
    record = {name: list(c.save) for name, c in contents.items()}
    (step_dir / CONTENTS_FILE).write_text(json.dumps(record, sort_keys=True))


def check_loadable(step_dir: Path, name: str, wanted: Sequence[str]) -> None:
    """Raise when `step_dir` lacks a part of module `name` that load_contents asks for."""
    path = step_dir / CONTENTS_FILE
    # Steps written before contents were recorded hold model, optimizer and extra.
    saved = json.loads(path.read_text()).get(name, []) if path.is_file() else list(DEFAULT)
    missing = [part for part in wanted if part != "hf_model" and part not in saved]
    if missing:
        raise CheckpointContentsError(
            f"{name}.checkpoint.load_contents asks for {missing} but {step_dir} holds only "
            f"{saved} ({name}.checkpoint.save_contents when it was written); drop them from "
            "load_contents or resume from a checkpoint that saved them"
        )
