"""Keys verl users rely on, honoured in a real CPU run: ReMax's greedy baseline, balance_batch,
checkpoint.save_contents/load_contents with hf_model, fsdp_config.model_dtype, and a reward model
with a tokenizer of its own, sharded with FSDP2."""

from __future__ import annotations

import shutil

import pytest
import torch
import torch.distributed.checkpoint as dcp

from tests.runtime.trainer.conftest import (
    TOKENIZER_DIR,
    base_config,
    read_metrics,
    read_weights,
    run_train,
    set_key,
)

pytestmark = pytest.mark.runtime

BALANCE_KEYS = {
    "global_seqlen/min",
    "global_seqlen/max",
    "global_seqlen/minmax_diff",
    "global_seqlen/balanced_min",
    "global_seqlen/balanced_max",
    "global_seqlen/mean",
}


def _dcp_dtypes(step_dir) -> set[torch.dtype]:
    meta = dcp.FileSystemReader(str(step_dir / "actor")).read_metadata()
    return {
        item.properties.dtype
        for key, item in meta.state_dict_metadata.items()
        if key.startswith("model.") and hasattr(item, "properties")
    }


def test_remax_trains_with_balance_hf_model_and_bf16_master_weights(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    config = base_config(tiny_model_dir, out, total_training_steps=2, save_freq=1)
    set_key(config, "algorithm.adv_estimator", "remax")
    set_key(config, "actor_rollout_ref.actor.use_kl_loss", False)
    set_key(config, "actor_rollout_ref.actor.fsdp_config.model_dtype", "bf16")
    set_key(config, "actor_rollout_ref.actor.checkpoint.save_contents", ["model", "hf_model"])
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = read_metrics(out)
    # ReMax's greedy rollout ran (verl's timing key) and balance_batch (on by default) reported.
    assert "timing_s/gen_max" in metrics[1]
    assert set(metrics[1]) >= BALANCE_KEYS
    assert metrics[1]["global_seqlen/balanced_max"] >= metrics[1]["global_seqlen/balanced_min"]

    step = out / "global_step_1"
    assert _dcp_dtypes(step) == {torch.bfloat16}
    assert not list(step.glob("extra_state_rank_*.pt"))  # "extra" was not asked for
    hf = read_weights(step / "actor" / "huggingface")
    final = read_weights(out / "global_step_2" / "actor" / "huggingface")
    assert any(not torch.equal(hf[k], final[k]) for k in hf)  # one HF model per checkpoint
    assert all(torch.equal(final[k], v) for k, v in read_weights(out / "huggingface").items())


def test_balance_batch_off_reports_nothing_and_load_contents_needs_saved_parts(
    tiny_model_dir, tmp_path
):
    out = tmp_path / "out"
    config = base_config(tiny_model_dir, out, total_training_steps=1, save_freq=1)
    set_key(config, "trainer.balance_batch", False)
    set_key(config, "actor_rollout_ref.actor.checkpoint.save_contents", ["model"])
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not BALANCE_KEYS & set(read_metrics(out)[1])

    # Resuming asks for what the step saved by default: the optimizer it does not hold.
    set_key(config, "actor_rollout_ref.actor.checkpoint.save_contents", ["model", "optimizer"])
    set_key(config, "trainer.total_training_steps", 2)
    failed = run_train(config, tmp_path)
    assert failed.returncode != 0
    assert "load_contents asks for ['optimizer']" in failed.stderr

    # load_contents: [model] is a warm start from the model alone.
    set_key(config, "actor_rollout_ref.actor.checkpoint.load_contents", ["model"])
    resumed = run_train(config, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert 2 in read_metrics(out)


def test_reward_model_with_its_own_tokenizer_scores_the_run(tiny_model_dir, tmp_path):
    rm_dir = tmp_path / "rm"
    shutil.copytree(tiny_model_dir, rm_dir)
    (rm_dir / "chat_template.jinja").write_text(
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    )
    out = tmp_path / "out"
    config = base_config(tiny_model_dir, out, total_training_steps=1)
    set_key(config, "reward_model.enable", True)
    set_key(config, "reward_model.model.path", str(rm_dir))
    set_key(config, "reward_model.model.input_tokenizer", str(TOKENIZER_DIR))
    set_key(config, "reward_model.model.fsdp_config.param_offload", True)
    set_key(config, "reward_model.micro_batch_size_per_gpu", 2)
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = read_metrics(out)[1]
    # The RM's head is untrained: its scores are real numbers, not the 0/1 rule reward.
    assert metrics["critic/score/mean"] not in (0.0, 1.0)
