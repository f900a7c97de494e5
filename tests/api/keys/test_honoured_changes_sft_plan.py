"""Honoured means read, for the SFT tree: setting any honoured SFT key to another valid value
changes the resolved ``SFTPlan``, and setting a no-effect one leaves it as it was.

As ``test_honoured_changes_plan.py`` for PPO/GRPO, on examples/demo-sft.yaml in a ModelArts
envelope (so ``af_output_dir`` is resolved as the operator resolves it).
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.keys import Fate
from kuberl_api.keys.sft import SFT_REGISTRY
from support.key_flips import Flipper, resolve

ROOT = Path(__file__).resolve().parents[3]
BASE = {
    "af_output_dir": "/outputs/sft",
    "backend_config": yaml.safe_load((ROOT / "examples/demo-sft.yaml").read_text()),
}
COMPANIONS: dict[str, dict[str, Any]] = {
    # Set in both documents; a row is a key or the start of keys, the longest that fits holds.
    "engine.ulysses_sequence_parallel_size": {
        "trainer.n_gpus_per_node": 2,  # SP 2 needs a world of 2
        "data.micro_batch_size_per_gpu": 16,  # a rank's 16 rows of the batch of 32
        "model.use_remove_padding": True,  # SP shards packed sequences
    },
    "model.lora_": {"model.lora_rank": 8},  # LoRA settings need LoRA (the adapter path: refused)
    "model.target_modules": {"model.lora_rank": 8},
    "model.exclude_modules": {"model.lora_rank": 8},
    "data.max_token_len_per_gpu": {"data.use_dynamic_bsz": True},  # the budget of dynamic bsz
    "optim.warmup_style": {"optim.lr_scheduler_type": None},  # deprecated: counts when unset
    "optim.lr_warmup_steps_ratio": {"optim.lr_warmup_steps": -1},  # steps win when > 0
    "optim.num_cycles": {"optim.lr_scheduler_type": "cosine"},  # cosine's
    "optim.min_lr_ratio": {"optim.lr_scheduler_type": "cosine"},
    "trainer.total_epochs": {"trainer.total_training_steps": None},  # steps win when set
    "trainer.default_hdfs_dir": {"trainer.default_hdfs_dir": "s3://bucket/ckpt"},  # a URL
    "trainer.resume_from_path": {
        "trainer.resume_mode": "resume_path",
        "trainer.resume_from_path": "/ckpt/global_step_5",  # required in that mode
    },
}
SFT = Flipper(BASE, SFTConfig, SFT_REGISTRY, COMPANIONS)
HONOURED = [e for e in SFT_REGISTRY.values() if e.fate is Fate.HONOURED]
NO_EFFECT = [e for e in SFT_REGISTRY.values() if e.fate is Fate.NO_EFFECT]


@pytest.mark.parametrize("entry", HONOURED, ids=lambda e: e.key)
def test_flipping_an_honoured_sft_key_changes_the_plan(entry):
    valid, changed, refusals = SFT.flip(entry)
    assert valid, f"{entry.key}: no other value validates: {refusals}"
    assert changed, (
        f"{entry.key} = any of {valid!r} leaves the SFT plan unchanged: the runtime cannot see "
        "it. Put the decision in the plan, or register the key no_effect (with the reason)."
    )


@pytest.mark.parametrize("entry", NO_EFFECT, ids=lambda e: e.key)
def test_flipping_a_no_effect_sft_key_leaves_the_plan_as_it_was(entry):
    valid, changed, _ = SFT.flip(entry)
    assert not changed, f"{entry.key} = {valid[-1]!r} changes the SFT plan ({changed})"


def test_an_optimizer_verl_cannot_build_from_torch_is_refused_by_name():
    plan, _, errors = resolve(SFT.document({"optim.optimizer": "Muon"}))
    assert plan is None
    assert any("optim.optimizer" in e and "Muon" in e and "AdamW" in e for e in errors), errors


def test_every_sft_companion_row_names_honoured_keys_and_validates():
    for row, settings in COMPANIONS.items():
        assert any(e.key.startswith(row) for e in HONOURED), row
        assert resolve(SFT.document(settings))[0] is not None, settings
