"""`kuberl train examples/vl-demo.yaml` with Ulysses SP: the runtime starts a vision-language job
with `ulysses_sequence_parallel_size: 2`, and two ranks as one SP group (dp 1 x sp 2) train on
image prompts exactly like two data-parallel ranks (dp 2 x sp 1): the same metrics every step and
the same exported weights, the vision encoder's (trained here) included.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from tests.runtime.trainer.conftest import deterministic, read_metrics, read_weights, run_train

pytestmark = pytest.mark.runtime

REPO = Path(__file__).resolve().parents[3]
DIGIT_REWARD = REPO / "tests" / "runtime" / "trainer" / "digit_reward.py"


def _config(model_dir: Path, train: Path, out: Path, sp: int) -> dict:
    config = yaml.safe_load((REPO / "examples" / "vl-demo.yaml").read_text())
    config["data"].update(train_files=str(train), val_files=None)
    actor_rollout_ref = config["actor_rollout_ref"]
    actor_rollout_ref["model"]["path"] = str(model_dir)
    actor_rollout_ref["actor"].update(freeze_vision_tower=False, ulysses_sequence_parallel_size=sp)
    config["custom_reward_function"] = {"path": str(DIGIT_REWARD)}
    config["trainer"].update(
        default_local_dir=str(out),
        total_training_steps=2,
        save_freq=-1,
        test_freq=-1,
        balance_batch=False,  # verl's balance_batch groups rows per DP rank: it depends on dp
    )
    return config


def test_vl_demo_sp_two_ranks_train_like_dp_two_ranks(tmp_path):
    from kuberl_runtime.testing.dots import write_dot_datasets
    from kuberl_runtime.testing.tiny_vl import save_tiny_vl

    model_dir = save_tiny_vl(tmp_path / "tiny-vl")
    train, _ = write_dot_datasets(tmp_path / "dots", num_train=8, num_test=2)
    outputs = {}
    for sp in (1, 2):
        out = tmp_path / f"sp{sp}"
        result = run_train(_config(model_dir, train, out, sp), tmp_path, timeout=600)
        assert result.returncode == 0, result.stderr[-4000:]
        assert ("dp 1 x sp 2" in result.stderr) == (sp == 2), result.stderr[-3000:]
        outputs[sp] = out
    dp, sp = read_metrics(outputs[1]), read_metrics(outputs[2])
    assert sorted(dp) == sorted(sp) == [1, 2]
    assert any(dp[step]["actor/pg_loss"] != 0 for step in dp)
    for step in dp:
        a, b = deterministic(dp[step]), deterministic(sp[step])
        assert a.keys() == b.keys()
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), (step, key)
    before = read_weights(model_dir)
    w1, w2 = read_weights(outputs[1] / "huggingface"), read_weights(outputs[2] / "huggingface")
    vision = [name for name in w1 if name.startswith("visual.")]
    assert vision and any(not torch.equal(w1[name], before[name]) for name in vision)
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-5, rtol=1e-4)
