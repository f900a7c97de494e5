"""What kuberl cannot honour is a warning (approximated) or an error (rejected), never dropped."""

import pytest

from kuberl_api.validation import Severity
from support.roll import validate, with_keys

W, E = Severity.WARNING, Severity.ERROR
SC = "actor_train.strategy_args.strategy_config"
IC = "actor_infer.strategy_args.strategy_config"

CASES = [
    # approximations: mapped to the nearest equivalent, with a warning
    (
        {
            f"{SC}.tensor_model_parallel_size": 2,
            "actor_train.training_args.gradient_accumulation_steps": 8,
        },
        W,
        f"{SC}.tensor_model_parallel_size",
        "tensor parallelism is approximated",
    ),
    (
        {
            f"{SC}.pipeline_model_parallel_size": 2,
            "actor_train.training_args.gradient_accumulation_steps": 8,
        },
        W,
        f"{SC}.pipeline_model_parallel_size",
        "pipeline parallelism is approximated",
    ),
    (
        {f"{SC}.expert_model_parallel_size": 2},
        W,
        f"{SC}.expert_model_parallel_size",
        "expert parallelism is approximated",
    ),
    (
        {f"{SC}.virtual_pipeline_model_parallel_size": 2},
        W,
        f"{SC}.virtual_pipeline_model_parallel_size",
        "virtual pipeline parallelism",
    ),
    (
        {
            "actor_train.strategy_args.strategy_name": "deepspeed_train",
            SC: {"zero_optimization": {"stage": 2}},
        },
        W,
        f"{SC}.zero_optimization.stage",
        "DeepSpeed ZeRO-2 is approximated by FSDP2",
    ),
    (
        {"actor_train.strategy_args.strategy_name": "deepspeed_train"},
        W,
        "actor_train.strategy_args.strategy_config",
        "DeepSpeed ZeRO-0 is approximated",
    ),
    (
        {"actor_infer.strategy_args.strategy_name": "sglang"},
        W,
        "actor_infer.strategy_args.strategy_name",
        "SGLang generation is approximated by vLLM",
    ),
    (
        {"actor_infer.strategy_args.strategy_name": "sglang", f"{IC}.mem_fraction_static": 0.7},
        W,
        f"{IC}.mem_fraction_static",
        "static memory fraction is approximated",
    ),
    (
        {"actor_infer.strategy_args.strategy_name": "megatron_infer"},
        W,
        "actor_infer.strategy_args.strategy_name",
        "approximated by the Hugging Face rollout",
    ),
    (
        {f"{IC}.tensor_model_parallel_size": None, f"{SC}.gpu_memory_utilization": 0.5},
        W,
        f"{SC}.gpu_memory_utilization",
        "ignored: gpu_memory_utilization has no meaning",
    ),
    (
        {"actor_infer.device_mapping": [2, 3]},
        W,
        "actor_infer.device_mapping",
        "kuberl colocates every role",
    ),
    ({"adv_estimator": "reinforce"}, W, "adv_estimator", "reinforce_plus_plus"),
    ({"adv_estimator": "grpo", "whiten_advantages": True}, W, "whiten_advantages", "never whitens"),
    (
        {"actor_train.data_args.template": "qwen2_5"},
        W,
        "actor_train.data_args.template",
        "approximated by the tokenizer's own chat template",
    ),
    (
        {"actor_train.data_args.domain_interleave_probs": {"math": 0.5, "code": 0.5}},
        W,
        "actor_train.data_args.domain_interleave_probs",
        "samples rows of all domains uniformly",
    ),
    (
        {"actor_train.data_args.dataset_dir": "data"},
        W,
        "actor_train.data_args.dataset_dir",
        "ignored",
    ),
    (
        {"actor_train.training_args.num_train_epochs": 3},
        W,
        "actor_train.training_args.num_train_epochs",
        "runs max_steps steps",
    ),
    ({"actor_infer.infer_batch_size": 4}, W, "actor_infer.infer_batch_size", "ignored"),
    ({"logging_steps": 10}, W, "logging_steps", "every step"),
    ({"val_batch_size": 10}, W, "val_batch_size", "one batch"),
    ({"reward_pretrain": "/m/rm"}, W, "reward_pretrain", "no critic worker"),
    ({"enable_reference": True}, W, "enable_reference", "only for a KL term"),
    ({"actor_infer.model_args.lora_rank": 8}, W, "actor_infer.model_args.lora_rank", "ignored"),
    (
        {"actor_infer.training_args": {"learning_rate": 1.0}},
        W,
        "actor_infer.training_args",
        "does not train",
    ),
    (
        {"validation.generating_args.max_new_tokens": 10},
        W,
        "validation.generating_args.max_new_tokens",
        "approximated by response_length",
    ),
    (
        {
            "rewards": {
                "math_rule": {
                    "worker_cls": "roll.pipeline.rlvr.rewards.MathRuleRewardWorker",
                    "tag_included": ["gsm8k"],
                    "world_size": 8,
                }
            }
        },
        W,
        "rewards.math_rule",
        "MathRuleRewardWorker is not run",
    ),
    ({"hydra": {"run": {"dir": "."}}}, W, "hydra", "not supported"),
    ({"system_envs": {"A": "1"}}, W, "system_envs", "not supported"),
    ({"tracker_kwargs": {"project": "p"}}, W, "tracker_kwargs", "not supported"),
    ({"actor_train.worker_cls": "roll.X"}, W, "actor_train.worker_cls", "not supported"),
    (
        {"actor_train.data_args.preprocessing_num_workers": 16},
        W,
        "actor_train.data_args.preprocessing_num_workers",
        "not supported",
    ),
    (
        {
            f"{SC}.context_parallel_size": 2,
            "actor_train.training_args.gradient_accumulation_steps": 8,
        },
        W,
        f"{SC}.context_parallel_size",
        "approximated by Ulysses sequence parallelism",
    ),
    # rejections: an error naming the key
    # (mapped onto verl keys the key registry refuses: api/kuberl_api/keys)
    (
        {"actor_train.data_args.prompt": "instruction"},
        E,
        "actor_train.data_args.messages",
        "conflicts with prompt",
    ),
    (
        {"actor_train.data_args.file_name": "/d/train.txt"},
        E,
        "actor_train.data_args.file_name",
        "JSON, JSONL, CSV and Parquet",
    ),
    (
        {"actor_train.data_args": {"messages": "m"}},
        E,
        "actor_train.data_args.file_name",
        "required",
    ),
    (
        {"actor_infer.generating_args.num_beams": 4},
        E,
        "actor_infer.generating_args.num_beams",
        "beam search is not supported",
    ),
    (
        {"actor_infer.generating_args.max_new_tokens": 10},
        E,
        "actor_infer.generating_args.max_new_tokens",
        "differs from response_length",
    ),
    (
        {"actor_infer.generating_args.num_return_sequences": 2},
        E,
        "actor_infer.generating_args.num_return_sequences",
        "differs from num_return_sequences_in_group",
    ),
    (
        {
            "actor_infer.num_gpus_per_worker": 2,
            "actor_infer.strategy_args.strategy_name": "sglang",
            f"{IC}.tp_size": 1,
        },
        E,
        "actor_infer.num_gpus_per_worker",
        "disagrees with the engine's tensor parallel size",
    ),
    (
        {"actor_infer.num_gpus_per_worker": 1, f"{IC}.tensor_parallel_size": 2},
        W,
        "actor_infer.num_gpus_per_worker",
        "ROLL sets a vLLM worker's num_gpus_per_worker to tensor_parallel_size",
    ),
    ({f"{IC}.load_format": "sharded_state"}, E, f"{IC}.load_format", "cannot load weights"),
    (
        {"actor_train.strategy_args.strategy_name": "vllm"},
        E,
        "actor_train.strategy_args.strategy_name",
        "needs a training strategy",
    ),
    (
        {"actor_infer.strategy_args.strategy_name": "megatron_train"},
        E,
        "actor_infer.strategy_args.strategy_name",
        "needs an inference strategy",
    ),
    (
        {"reference": {"strategy_args": {"strategy_name": "vllm"}, "device_mapping": [0, 1]}},
        E,
        "reference.strategy_args.strategy_name",
        "training-framework forward",
    ),
    (
        {"actor_infer.model_args.model_name_or_path": "/other"},
        E,
        "actor_infer.model_args.model_name_or_path",
        "must start from the trained model",
    ),
    ({"pretrain": None}, E, "pretrain", "required"),
    ({"adv_estimator": "gae"}, E, "adv_estimator", "no critic worker"),
    ({"adv_estimator": "gigpo"}, E, "adv_estimator", "must be one of gae, grpo, reinforce"),
    ({"actor_train.device_mapping": None}, E, "actor_train.device_mapping", "required"),
    ({"actor_train.device_mapping": "range(8)"}, E, "actor_train.device_mapping", "cannot read"),
    ({"actor_train.device_mapping": [0, 0]}, E, "actor_train.device_mapping", "more than once"),
    (
        {"actor_train.device_mapping": [0, 1, 2], "num_gpus_per_node": 2},
        E,
        "actor_train.device_mapping",
        "do not fill whole nodes",
    ),
    ({f"{SC}.tensor_model_parallel_size": 3}, E, SC, "cannot be split into model-parallel groups"),
    (
        {
            "actor_train.strategy_args.strategy_name": "deepspeed_train",
            SC: {"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}},
        },
        E,
        f"{SC}.zero_optimization.offload_param.device",
        "cannot offload to NVMe",
    ),
    ({"whiten_rewards": True}, E, "whiten_rewards", "has no equivalent"),
    ({"error_max_len_clip": True}, E, "error_max_len_clip", "has no equivalent"),
    ({"norm_mean_type": "running"}, E, "norm_mean_type", "running reward statistics"),
    (
        {"adv_estimator": "grpo", "norm_std_type": "batch"},
        W,
        "norm_std_type",
        "group mean and std regardless",
    ),
    ({"async_generation_ratio": 1}, E, "async_generation_ratio", "synchronous"),
    ({"actor_train.pg_variant": "topr"}, E, "actor_train.pg_variant", "ppo variant"),
    (
        {"validation.data_args": {"file_name": "/d/v.jsonl", "prompt": "p"}},
        E,
        "validation.data_args",
        "one column for both",
    ),
    # unknown keys: schema errors with the nearest valid key
    ({"rollout_batch_sise": 8}, E, "rollout_batch_sise", "did you mean rollout_batch_size?"),
    (
        {"actor_train.training_args.learning_rat": 1.0},
        E,
        "actor_train.training_args.learning_rat",
        "did you mean actor_train.training_args.learning_rate?",
    ),
    (
        {"actor_infer.generating_args.temprature": 1.0},
        E,
        "actor_infer.generating_args.temprature",
        "did you mean actor_infer.generating_args.temperature?",
    ),
    (
        {"actor_train.model_args.dtype": "bf61"},
        E,
        "actor_train.model_args.dtype",
        "must be one of fp32, bf16, fp16",
    ),
]


def _id(case) -> str:
    return f"{case[1]}:{case[2]}"


@pytest.mark.parametrize(
    ("changes", "severity", "path", "text"), CASES, ids=[_id(c) for c in CASES]
)
def test_problem_names_the_roll_key(base, changes, severity, path, text):
    result = validate(with_keys(base, changes))
    matches = [p for p in result.problems if p.path == path and p.severity is severity]
    assert matches, [f"{p.severity}: {p.render()}" for p in result.problems]
    assert any(text in p.render() for p in matches), [p.render() for p in matches]
    assert all(p.hint for p in matches)
    if severity is W:
        assert result.ok and result.backend_config is not None


def test_batch_rule_error_explains_the_arithmetic(base):
    raw = with_keys(
        base,
        {
            "actor_train.device_mapping": "list(range(0,8))",
            "actor_infer.device_mapping": "list(range(0,8))",
            f"{SC}.tensor_model_parallel_size": 2,
            "actor_train.training_args.per_device_train_batch_size": 1,
            "actor_train.training_args.gradient_accumulation_steps": 3,
        },
    )
    (problem,) = validate(raw).errors
    assert problem.path == "actor_train.training_args.per_device_train_batch_size"
    assert problem.render() == (
        "actor_train.training_args.per_device_train_batch_size: ROLL's optimisation batch "
        "per_device_train_batch_size x gradient_accumulation_steps x data-parallel size = "
        "1 x 3 x 4 (8 devices / TP 2 x PP 1 x CP 1) = 12 responses does not divide the rollout "
        "of rollout_batch_size x num_return_sequences_in_group = 8 x 4 = 32 responses, so a "
        "step would end with a partial optimisation step (got 1) — for one optimisation step "
        "per rollout set gradient_accumulation_steps: 8 (1 x 8 x 4 = 32)"
    )


def test_batch_rule_needs_whole_prompt_groups(base):
    raw = with_keys(
        base,
        {
            "actor_train.training_args.per_device_train_batch_size": 1,
            "actor_train.training_args.gradient_accumulation_steps": 1,
        },
    )
    (problem,) = validate(raw).errors
    assert "is not a whole number of prompt groups of num_return_sequences_in_group=4" in (
        problem.message
    )


def test_several_optimisation_steps_per_rollout_are_allowed(base):
    raw = with_keys(base, {"actor_train.training_args.gradient_accumulation_steps": 2})
    result = validate(raw)
    assert result.problems == []
    assert result.backend_config.actor_rollout_ref.actor.ppo_mini_batch_size == 4


def test_verl_rule_failures_point_at_the_roll_key(base):
    raw = with_keys(base, {f"{IC}.tensor_parallel_size": 4, "num_gpus_per_node": 2})
    problems = validate(raw).errors
    assert [p.path for p in problems] == [f"{IC}.tensor_parallel_size"]
    assert "(as actor_rollout_ref.rollout.tensor_model_parallel_size)" in problems[0].message


def test_the_base_config_has_no_problems(base):
    assert validate(base).problems == []
