"""A ROLL FSDP2 config written with the strategy keys of ROLL's own FSDP2 examples (fsdp_size,
param_dtype, reduce_dtype, reshard_after_forward, offload_policy, wrap_policy; reference on
fsdp2_infer) trains a step on CPU with `kuberl train`, the keys in effect in the run plan."""

from __future__ import annotations

import pytest

from kuberl_api.plan.from_document import plan_job_file
from tests.runtime.algorithms.test_roll_rlvr_train import roll_example
from tests.runtime.trainer.conftest import read_metrics, run_train

pytestmark = pytest.mark.runtime

ROLL_FSDP2 = {
    "fsdp_size": 1,  # ROLL: <= 1 is one shard group over every rank
    "param_dtype": "fp32",
    "reduce_dtype": "float32",
    "reshard_after_forward": False,
    "offload_policy": True,
    "wrap_policy": {"transformer_layer_cls_to_wrap": ["Qwen2DecoderLayer"]},
}


def test_roll_fsdp2_strategy_keys_train_a_step(tmp_path, tiny_model_dir):
    out = tmp_path / "out"
    config = roll_example(tiny_model_dir, out, max_steps=1, max_len_mask=False)
    config["difficulty_low_threshold"] = -1.0
    config["actor_train"]["strategy_args"]["strategy_config"] = dict(ROLL_FSDP2)
    config["reference"]["strategy_args"] = {
        "strategy_name": "fsdp2_infer",
        "strategy_config": {k: v for k, v in ROLL_FSDP2.items() if k != "reduce_dtype"},
    }
    done = run_train(config, tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "actor/pg_loss" in read_metrics(out)[1]
    plan = plan_job_file(tmp_path / "config-0.yaml").plan
    actor = plan.actor.fsdp_config
    assert (actor.fsdp_size, actor.offload_policy, actor.reshard_after_forward) == (-1, True, False)
    assert (actor.dtype, actor.reduce_dtype) == ("fp32", "float32")
    assert plan.ref is not None and plan.ref.fsdp_config.offload_policy is True


def test_roll_ulysses_size_trains_in_sequence_parallel_groups(tmp_path, tiny_model_dir):
    out = tmp_path / "out"
    config = roll_example(tiny_model_dir, out, max_steps=1, max_len_mask=False, num_gpus_per_node=2)
    config["difficulty_low_threshold"] = -1.0
    for role in ("actor_train", "actor_infer", "reference"):
        config[role]["device_mapping"] = "list(range(0,2))"
    for role in ("actor_train", "reference"):
        config[role]["model_args"]["ulysses_size"] = 2
    done = run_train(config, tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dp 1 x sp 2" in done.stderr, done.stderr[-3000:]
    assert "actor/pg_loss" in read_metrics(out)[1]
