"""Keys ROLL's other RLVR examples (Megatron, vision, video, async) write: each is used, named
in a warning, or refused with the reason, never an unknown key."""

import pytest

from kuberl_api.validation.problems import Severity
from support.roll import validate, with_keys

W, E = Severity.WARNING, Severity.ERROR
TC = "actor_train.strategy_args.strategy_config"
IC = "actor_infer.strategy_args.strategy_config"

CASES = [
    ({f"{TC}.recompute_granularity": "full"}, W, f"{TC}.recompute_granularity", "Megatron-Core"),
    ({f"{TC}.moe_grouped_gemm": True}, W, f"{TC}.moe_grouped_gemm", "MoE kernel"),
    (
        {f"{TC}.moe_token_dispatcher_type": "alltoall"},
        W,
        f"{TC}.moe_token_dispatcher_type",
        "FSDP2",
    ),
    ({f"{TC}.bias_activation_fusion": True}, W, f"{TC}.bias_activation_fusion", "kernel fusion"),
    ({f"{TC}.overlap_grad_reduce": True}, W, f"{TC}.overlap_grad_reduce", "overlap"),
    ({f"{TC}.moe_aux_loss_coeff": 0.01}, E, f"{TC}.moe_aux_loss_coeff", "load-balancing"),
    ({f"{IC}.cudagraph_capture_sizes": [1, 2]}, W, f"{IC}.cudagraph_capture_sizes", "engine"),
    ({f"{IC}.pipeline_parallel_size": 2}, E, f"{IC}.pipeline_parallel_size", "tensor paral"),
    (
        {"actor_train.max_tokens_per_microbatch_in_train": 8192},
        W,
        "actor_train.max_tokens_per_microbatch_in_train",
        "ignored",
    ),
    (
        {"actor_train.sequence_packing_args": {"algorithm": "x"}},
        W,
        "actor_train.sequence_packing_args",
        "packs",
    ),
    (
        {"actor_train.data_args.image_max_pixels": 1048576},
        E,
        "actor_train.data_args.image_max_pixels",
        "max_pixels",
    ),
    (
        {"actor_train.data_args.video_fps": 2},
        E,
        "actor_train.data_args.video_fps",
        "no video inputs",
    ),
    (
        {"actor_train.data_args.custom_data_kwargs_func": "m.f"},
        E,
        "actor_train.data_args.custom_data_kwargs_func",
        "data hooks",
    ),
    (
        {"validation.data_args.preprocessing_num_workers": 8},
        W,
        "validation.data_args.preprocessing_num_workers",
        "tokenises",
    ),
    ({"global_template": "qwen2_5"}, W, "global_template", "chat template"),
    ({"offload_nccl": True}, W, "offload_nccl", "ignored"),
    ({"reward_norm": "batch"}, E, "reward_norm", "no equivalent"),
    ({"reward_model": {"x": 1}}, E, "reward_model", "custom_reward_function"),
    ({"reward_system_config": {"x": 1}}, E, "reward_system_config", "custom_reward_function"),
    ({"rollout_mock": {"enable": True}}, E, "rollout_mock", "replay"),
    ({"track_with": "ml_tracker"}, E, "track_with", "stdout, tensorboard, wandb, swanlab"),
]


@pytest.mark.parametrize(("changes", "severity", "path", "text"), CASES, ids=[c[2] for c in CASES])
def test_example_key_is_used_warned_or_refused(base, changes, severity, path, text):
    result = validate(with_keys(base, changes))
    matches = [p for p in result.problems if p.path == path and p.severity is severity]
    assert matches, [p.render() for p in result.problems]
    assert any(text in p.render() for p in matches), [p.render() for p in matches]
    assert not any("unknown key" in p.message for p in result.problems)
    if severity is W:
        assert result.ok


@pytest.mark.parametrize("harmless", [{"reward_shift": False}, {f"{TC}.moe_aux_loss_coeff": 0.0}])
def test_values_kuberl_runs_anyway_say_nothing(base, harmless):
    result = validate(with_keys(base, harmless))
    assert result.ok and not result.warnings, [p.render() for p in result.problems]


def test_megatron_bf16_flag_is_accepted(base):
    result = validate(with_keys(base, {f"{TC}.bf16": True}))
    assert result.ok and not result.warnings, [p.render() for p in result.problems]


def test_device_mapping_as_a_list_call(base):
    mapping = "list([0,1,2,3,8,9,10,11])"
    changes = {
        "actor_train.device_mapping": mapping,
        "actor_infer.device_mapping": mapping,
        "actor_train.training_args.gradient_accumulation_steps": 1,
    }
    result = validate(with_keys(base, changes))
    assert result.ok, [p.render() for p in result.errors]
    assert result.backend_config.trainer.n_gpus_per_node * result.backend_config.trainer.nnodes == 8
