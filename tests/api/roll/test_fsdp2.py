"""ROLL's FSDP2 keys: each lands on the verl key kuberl honours, and the run plan shows it."""

import pytest

from kuberl_api.plan import build_run_plan
from support.roll import validate, verl, with_keys

TRAIN_SC = "actor_train.strategy_args.strategy_config"
REF_SC = "reference.strategy_args.strategy_config"
FSDP2 = {
    "actor_train.strategy_args.strategy_name": "fsdp2_train",
    "actor_train.device_mapping": "list(range(0,8))",
    "actor_infer.device_mapping": "list(range(0,8))",
    "actor_train.training_args.per_device_train_batch_size": 1,
    "actor_train.training_args.gradient_accumulation_steps": 4,
}
REFERENCE = {
    "use_kl_loss": True,
    "kl_loss_coef": 0.01,
    "reference.strategy_args.strategy_name": "fsdp2_infer",
    "reference.device_mapping": "list(range(0,8))",
}


def accepted(base: dict, changes: dict):
    result = validate(with_keys(base, {**FSDP2, **changes}))
    assert result.ok, [p.render() for p in result.errors]
    return result, build_run_plan(result.backend_config, result.af_output_dir)


def refused(base: dict, changes: dict, path: str) -> str:
    result = validate(with_keys(base, {**FSDP2, **changes}))
    messages = [p.render() for p in result.errors if p.path == path]
    assert messages, [p.render() for p in result.errors]
    return messages[0]


def warned(result, path: str) -> str:
    messages = [p.render() for p in result.warnings if p.path == path]
    assert messages, [p.render() for p in result.warnings]
    return messages[0]


@pytest.mark.parametrize(
    ("fsdp_size", "expected"),
    [(4, 4), (2, 2), (8, -1), (16, -1), (1, -1)],  # ROLL: <= 1 or >= world is one 1-D mesh
)
def test_fsdp_size_is_hybrid_shard_groups_or_all_ranks(base, fsdp_size, expected):
    result, plan = accepted(base, {f"{TRAIN_SC}.fsdp_size": fsdp_size})
    assert verl(result, "actor_rollout_ref.actor.fsdp_config.fsdp_size") == expected
    assert plan.actor.fsdp_config.fsdp_size == expected


def test_fsdp_size_that_does_not_divide_the_devices_is_refused_at_the_roll_key(base):
    message = refused(base, {f"{TRAIN_SC}.fsdp_size": 3}, f"{TRAIN_SC}.fsdp_size")
    assert "3" in message and "fsdp_size" in message


def test_param_and_reduce_dtype_are_the_mixed_precision_policy(base):
    changes = {f"{TRAIN_SC}.param_dtype": "bf16", f"{TRAIN_SC}.reduce_dtype": "float32"}
    result, plan = accepted(base, changes)
    assert verl(result, "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype") == "bf16"
    assert plan.actor.fsdp_config.dtype == "bf16"
    assert plan.actor.fsdp_config.reduce_dtype == "float32"
    result, plan = accepted(base, {f"{TRAIN_SC}.reduce_dtype": "bf16"})
    assert plan.actor.fsdp_config.reduce_dtype == "bf16"


@pytest.mark.parametrize("key", ["reshard_after_forward", "offload_policy"])
@pytest.mark.parametrize("value", [True, False])
def test_fully_shard_arguments_map_one_to_one(base, key, value):
    _result, plan = accepted(base, {f"{TRAIN_SC}.{key}": value})
    assert getattr(plan.actor.fsdp_config, key) is value


def test_reference_fsdp2_infer_maps_onto_the_reference_fsdp_config(base):
    changes = {
        **REFERENCE,
        f"{REF_SC}.offload_policy": True,
        f"{REF_SC}.param_dtype": "bf16",
        f"{REF_SC}.reshard_after_forward": False,
        f"{REF_SC}.fsdp_size": 8,
    }
    _result, plan = accepted(base, changes)
    assert plan.ref is not None
    assert plan.ref.fsdp_config.offload_policy is True
    assert plan.ref.fsdp_config.reshard_after_forward is False
    assert plan.ref.fsdp_config.dtype == "bf16"
    assert plan.ref.fsdp_config.fsdp_size == -1
    assert plan.actor.fsdp_config.offload_policy is False


def test_reference_shard_groups_are_approximated_by_all_ranks(base):
    result, plan = accepted(base, {**REFERENCE, f"{REF_SC}.fsdp_size": 4})
    assert "all 8 ranks, not in groups of 4" in warned(result, f"{REF_SC}.fsdp_size")
    assert plan.ref.fsdp_config.fsdp_size == -1


def test_ulysses_size_is_the_sequence_parallel_degree(base):
    result, plan = accepted(base, {"actor_train.model_args.ulysses_size": 2})
    assert verl(result, "actor_rollout_ref.actor.ulysses_sequence_parallel_size") == 2
    assert verl(result, "actor_rollout_ref.model.use_remove_padding") is True
    assert (plan.placement.sp_size, plan.placement.dp_size) == (2, 4)
    # ROLL's data-parallel size is world / ulysses_size: 1 x 4 x 4 = 16 responses per update.
    assert verl(result, "actor_rollout_ref.actor.ppo_mini_batch_size") == 4


def test_ulysses_size_conflicting_with_context_parallel_is_refused(base):
    changes = {
        "actor_train.model_args.ulysses_size": 2,
        f"{TRAIN_SC}.context_parallel_size": 4,
        "actor_train.strategy_args.strategy_name": "megatron_train",
    }
    message = refused(base, changes, "actor_train.model_args.ulysses_size")
    assert "context_parallel_size (4)" in message and "keep one of them" in message


def test_reference_ulysses_size_follows_the_actor_with_a_warning(base):
    changes = {
        **REFERENCE,
        "actor_train.model_args.ulysses_size": 4,
        "reference.model_args.ulysses_size": 2,
    }
    result, plan = accepted(base, changes)
    assert "ulysses_size 4" in warned(result, "reference.model_args.ulysses_size")
    assert plan.placement.sp_size == 4


@pytest.mark.parametrize("prefix", ["model.visual", "visual", " model.visual ,visual"])
def test_freezing_the_vision_tower_is_freeze_vision_tower(base, prefix):
    _result, plan = accepted(base, {"actor_train.model_args.freeze_module_prefix": prefix})
    assert plan.actor.freeze_vision_tower is True


def test_no_prefix_trains_everything(base):
    _result, plan = accepted(base, {})
    assert plan.actor.freeze_vision_tower is False


def test_freezing_other_modules_is_refused_naming_them(base):
    key = "actor_train.model_args.freeze_module_prefix"
    message = refused(base, {key: "model.visual,model.layers.0"}, key)
    assert "freezing model.layers.0 is not supported" in message
    assert "LoRA" in message


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("apply_tiled_mlp", True, "untiled"),
        ("apply_expert_patch", True, "MoE forward"),
        ("moe_use_grouped_mm", True, "MoE forward"),
        ("use_batched_model_update", True, "bucket by bucket"),
        ("ep_size", 8, "expert parallelism is approximated"),
        ("wrap_policy", {"transformer_layer_cls_to_wrap": ["Qwen3DecoderLayer"]}, "FSDP unit"),
    ],
)
def test_layout_options_are_named_in_a_warning(base, key, value, says):
    result, _ = accepted(base, {f"{TRAIN_SC}.{key}": value})
    assert says in warned(result, f"{TRAIN_SC}.{key}")


def test_vllm_engine_options(base):
    sc = "actor_infer.strategy_args.strategy_config"
    changes = {f"{sc}.disable_log_stats": False, f"{sc}.sleep_level": 2}
    result, _plan = accepted(base, changes)
    assert verl(result, "actor_rollout_ref.rollout.disable_log_stats") is False
    assert "level 1" in warned(result, f"{sc}.sleep_level")


def test_use_remove_padding_is_accepted_as_roll_ignores_it(base):
    result, plan = accepted(base, {"actor_train.use_remove_padding": False})
    assert "ROLL reads no such key" in warned(result, "actor_train.use_remove_padding")
    assert plan.actor.use_remove_padding is True


def test_top_level_hydra_variables_are_resolved_then_dropped(base):
    changes = {
        "lora_rank": 8,
        "pg_variant": "ppo",
        "exp_name": "run-${pg_variant}",
        "actor_train.model_args.lora_rank": "${lora_rank}",
    }
    result, _ = accepted(base, changes)
    assert verl(result, "actor_rollout_ref.model.lora_rank") == 8
    assert verl(result, "trainer.experiment_name") == "run-ppo"


def test_an_unreferenced_unknown_top_level_key_stays_an_error(base):
    result = validate(with_keys(base, {**FSDP2, "lora_rank": 8}))
    assert [p.path for p in result.errors] == ["lora_rank"]


def test_fsdp2_keys_on_a_megatron_strategy_are_named_unused(base):
    changes = {
        "actor_train.strategy_args.strategy_name": "megatron_train",
        f"{TRAIN_SC}.fsdp_size": 4,
    }
    result, plan = accepted(base, changes)
    assert "no meaning for strategy megatron_train" in warned(result, f"{TRAIN_SC}.fsdp_size")
    assert plan.actor.fsdp_config.fsdp_size == -1
