"""Every ROLL key kuberl translates lands on the right verl key with the right value."""

import pytest

from support.roll import validate, verl, with_keys

CASES = [
    # pipeline
    ({"rollout_batch_size": 16}, "data.train_batch_size", 16),
    (
        {
            "num_return_sequences_in_group": 2,
            "actor_train.training_args.gradient_accumulation_steps": 2,
        },
        "actor_rollout_ref.rollout.n",
        2,
    ),
    ({"prompt_length": 256}, "data.max_prompt_length", 256),
    ({"prompt_length": 256}, "actor_rollout_ref.rollout.prompt_length", 256),
    ({"response_length": 32}, "data.max_response_length", 32),
    ({"response_length": 32}, "actor_rollout_ref.rollout.response_length", 32),
    ({"exp_name": "x"}, "trainer.experiment_name", "x"),
    ({"seed": 7}, "trainer.seed", 7),
    ({"seed": 7}, "data.seed", 7),
    ({"output_dir": "./out"}, "trainer.default_local_dir", "./out"),
    ({"max_steps": 12}, "trainer.total_training_steps", 12),
    ({"save_steps": 5}, "trainer.save_freq", 5),
    ({"eval_steps": 3}, "trainer.test_freq", 3),
    ({"logging_steps": 1}, "trainer.test_freq", -1),
    ({"resume_from_checkpoint": True}, "trainer.resume_mode", "auto"),
    ({"resume_from_checkpoint": False}, "trainer.resume_mode", "disable"),
    ({"resume_from_checkpoint": "/ckpt/global_step_3"}, "trainer.resume_mode", "resume_path"),
    (
        {"resume_from_checkpoint": "/ckpt/global_step_3"},
        "trainer.resume_from_path",
        "/ckpt/global_step_3",
    ),
    ({"track_with": "wandb"}, "trainer.logger", ["console", "wandb"]),
    ({"track_with": "stdout"}, "trainer.logger", ["console"]),
    ({"pretrain": "/m/a"}, "actor_rollout_ref.model.path", "/m/a"),
    ({"actor_train.model_args.model_name_or_path": "/m/b"}, "actor_rollout_ref.model.path", "/m/b"),
    # algorithm (ROLL's defaults where the key is absent)
    ({"adv_estimator": "grpo"}, "algorithm.adv_estimator", "grpo"),
    ({}, "algorithm.lam", 0.95),
    ({"lambd": 0.9}, "algorithm.lam", 0.9),
    ({"gamma": 0.99}, "algorithm.gamma", 0.99),
    ({"ppo_epochs": 2}, "actor_rollout_ref.actor.ppo_epochs", 2),
    ({"max_grad_norm": 0.5}, "actor_rollout_ref.actor.grad_clip", 0.5),
    ({"pg_clip": 0.3}, "actor_rollout_ref.actor.clip_ratio", 0.3),
    ({"pg_clip": 0.3}, "actor_rollout_ref.actor.clip_ratio_low", 0.3),
    ({"pg_clip": 0.3}, "actor_rollout_ref.actor.clip_ratio_high", 0.3),
    ({"use_pg_clip_range": True}, "actor_rollout_ref.actor.clip_ratio_low", 0.2),
    (
        {"use_pg_clip_range": True, "pg_clip_high": 0.28},
        "actor_rollout_ref.actor.clip_ratio_high",
        0.28,
    ),
    ({}, "actor_rollout_ref.actor.clip_ratio_c", 1.0e9),
    ({"dual_clip_loss": True}, "actor_rollout_ref.actor.clip_ratio_c", 3.0),
    ({"add_token_level_kl": True}, "algorithm.use_kl_in_reward", True),
    ({"init_kl_coef": 0.05}, "algorithm.kl_ctrl.kl_coef", 0.05),
    ({"target_kl": 0.2}, "algorithm.kl_ctrl.type", "adaptive"),
    ({"target_kl": 0.2}, "algorithm.kl_ctrl.target_kl", 0.2),
    ({"kl_horizon": 500}, "algorithm.kl_ctrl.horizon", 500),
    ({"kl_penalty": "abs"}, "algorithm.kl_penalty", "abs"),
    ({"use_kl_loss": True, "kl_loss_coef": 0.01}, "actor_rollout_ref.actor.kl_loss_coef", 0.01),
    ({"use_kl_loss": True}, "actor_rollout_ref.actor.use_kl_loss", True),
    ({"entropy_loss_coef": 0.001}, "actor_rollout_ref.actor.entropy_coeff", 0.001),
    ({}, "actor_rollout_ref.actor.loss_agg_mode", "seq-mean-token-mean"),
    ({"loss_agg_mode": "token-mean"}, "actor_rollout_ref.actor.loss_agg_mode", "token-mean"),
    ({"critic_warmup": 2}, "trainer.critic_warmup", 2),
    # actor_train.model_args
    ({"actor_train.model_args.dtype": "bf16"}, "actor_rollout_ref.actor.fsdp_config.dtype", "bf16"),
    ({"actor_train.model_args.dtype": "fp32"}, "actor_rollout_ref.actor.fsdp_config.dtype", "fp32"),
    (
        {"actor_train.model_args.disable_gradient_checkpointing": True},
        "actor_rollout_ref.model.enable_gradient_checkpointing",
        False,
    ),
    ({}, "actor_rollout_ref.model.enable_gradient_checkpointing", True),
    (
        {"actor_train.model_args.attn_implementation": "fa2"},
        "actor_rollout_ref.model.override_config",
        {"attn_implementation": "flash_attention_2"},
    ),
    ({"actor_train.model_args.lora_rank": 8}, "actor_rollout_ref.model.lora_rank", 8),
    ({"actor_train.model_args.lora_alpha": 32}, "actor_rollout_ref.model.lora_alpha", 32),
    (
        {"actor_train.model_args.lora_target": "q_proj,v_proj"},
        "actor_rollout_ref.model.target_modules",
        "q_proj,v_proj",
    ),
    ({"actor_infer.model_args.dtype": "fp16"}, "actor_rollout_ref.rollout.dtype", "float16"),
    ({"actor_infer.model_args.dtype": "fp32"}, "actor_rollout_ref.rollout.dtype", "float32"),
    # actor_train.training_args (absent: Hugging Face TrainingArguments' defaults)
    ({"actor_train.training_args.learning_rate": 2.0e-6}, "actor_rollout_ref.actor.optim.lr", 2e-6),
    ({}, "actor_rollout_ref.actor.optim.lr", 5e-5),
    (
        {"actor_train.training_args.weight_decay": 0.1},
        "actor_rollout_ref.actor.optim.weight_decay",
        0.1,
    ),
    ({}, "actor_rollout_ref.actor.optim.weight_decay", 0.0),
    (
        {"actor_train.training_args.warmup_steps": 20},
        "actor_rollout_ref.actor.optim.lr_warmup_steps",
        20,
    ),
    (
        {"actor_train.training_args.warmup_ratio": 0.1},
        "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio",
        0.1,
    ),
    (
        {"actor_train.training_args.lr_scheduler_type": "cosine"},
        "actor_rollout_ref.actor.optim.lr_scheduler_type",
        "cosine",
    ),
    (
        {"actor_train.training_args.lr_scheduler_type": "constant_with_warmup"},
        "actor_rollout_ref.actor.optim.lr_scheduler_type",
        "constant",
    ),
    ({"actor_train.training_args.max_grad_norm": 0.3}, "actor_rollout_ref.actor.grad_clip", 0.3),
    ({}, "actor_rollout_ref.actor.ppo_mini_batch_size", 8),
    ({}, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 4),
    (
        {
            "actor_train.training_args.per_device_train_batch_size": 2,
            "actor_train.training_args.gradient_accumulation_steps": 2,
        },
        "actor_rollout_ref.actor.ppo_mini_batch_size",
        2,
    ),
    # data_args
    ({}, "data.train_files", "/data/train.jsonl"),
    (
        {"actor_train.data_args.file_name": ["/d/a.csv", "/d/b.json"]},
        "data.train_files",
        ["/d/a.csv", "/d/b.json"],
    ),
    ({"actor_train.data_args.file_name": "/d/a.parquet"}, "data.train_files", "/d/a.parquet"),
    ({}, "data.prompt_key", "messages"),
    (
        {"actor_train.data_args.messages": None, "actor_train.data_args.prompt": "instruction"},
        "data.prompt_key",
        "instruction",
    ),
    ({"validation.data_args.file_name": "/data/test.jsonl"}, "data.val_files", "/data/test.jsonl"),
    ({"validation.eval_steps": 4}, "trainer.test_freq", 4),
    (
        {"validation.generating_args.temperature": 0.6},
        "actor_rollout_ref.rollout.val_kwargs.temperature",
        0.6,
    ),
    (
        {"validation.generating_args.temperature": 0.6},
        "actor_rollout_ref.rollout.val_kwargs.do_sample",
        True,
    ),
    ({"validation.generating_args.top_p": 0.9}, "actor_rollout_ref.rollout.val_kwargs.top_p", 0.9),
    ({"validation.generating_args.top_k": 50}, "actor_rollout_ref.rollout.val_kwargs.top_k", 50),
    (
        {"validation.generating_args.num_return_sequences": 2},
        "actor_rollout_ref.rollout.val_kwargs.n",
        2,
    ),
    # generating_args
    (
        {"actor_infer.generating_args.temperature": 0.99},
        "actor_rollout_ref.rollout.temperature",
        0.99,
    ),
    ({"actor_infer.generating_args.top_p": 0.95}, "actor_rollout_ref.rollout.top_p", 0.95),
    ({"actor_infer.generating_args.top_k": 100}, "actor_rollout_ref.rollout.top_k", 100),
    (
        {"actor_infer.generating_args.do_sample": False},
        "actor_rollout_ref.rollout.do_sample",
        False,
    ),
    ({"actor_infer.generating_args.max_new_tokens": 64}, "data.max_response_length", 64),
    ({"actor_infer.generating_args.num_return_sequences": 4}, "actor_rollout_ref.rollout.n", 4),
    ({"actor_infer.generating_args.num_beams": 1}, "actor_rollout_ref.rollout.n", 4),
    # strategy_args
    ({}, "actor_rollout_ref.actor.strategy", "fsdp2"),
    (
        {"actor_train.strategy_args.strategy_name": "fsdp2_train"},
        "actor_rollout_ref.actor.strategy",
        "fsdp2",
    ),
    ({}, "actor_rollout_ref.rollout.name", "vllm"),
    (
        {"actor_infer.strategy_args.strategy_name": "hf_infer"},
        "actor_rollout_ref.rollout.name",
        "hf",
    ),
    (
        {"actor_infer.strategy_args.strategy_config.gpu_memory_utilization": 0.6},
        "actor_rollout_ref.rollout.gpu_memory_utilization",
        0.6,
    ),
    (
        {"actor_infer.strategy_args.strategy_config.block_size": 16},
        "actor_rollout_ref.rollout.engine_kwargs.vllm",
        {"block_size": 16},
    ),
    (
        {"actor_infer.strategy_args.strategy_config.max_model_len": 8000},
        "actor_rollout_ref.rollout.max_model_len",
        8000,
    ),
    (
        {"actor_infer.strategy_args.strategy_config.load_format": "auto"},
        "actor_rollout_ref.rollout.load_format",
        "auto",
    ),
    (
        {"actor_infer.strategy_args.strategy_config.enforce_eager": False},
        "actor_rollout_ref.rollout.enforce_eager",
        False,
    ),
    (
        {"actor_infer.strategy_args.strategy_config.tensor_parallel_size": 2},
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        2,
    ),
    (
        {"actor_infer.num_gpus_per_worker": 2, "actor_infer.strategy_args.strategy_name": "sglang"},
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        2,
    ),
    # ROLL sets a vllm worker's num_gpus_per_worker to its tensor_parallel_size (default 1).
    (
        {"actor_infer.num_gpus_per_worker": 2},
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        1,
    ),
    ({}, "actor_rollout_ref.rollout.tensor_model_parallel_size", 1),
    (
        {
            "actor_train.strategy_args.strategy_name": "deepspeed_train",
            "actor_train.strategy_args.strategy_config": {
                "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}
            },
        },
        "actor_rollout_ref.actor.fsdp_config.param_offload",
        True,
    ),
    (
        {
            "actor_train.strategy_args.strategy_name": "deepspeed_train",
            "actor_train.strategy_args.strategy_config": "${deepspeed_zero3_cpuoffload}",
        },
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
        True,
    ),
    # infer_batch_size, device_mapping, num_gpus_per_node
    (
        {"actor_train.infer_batch_size": 6},
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        6,
    ),
    ({}, "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", 4),
    (
        {
            "reference": {
                "device_mapping": [0, 1],
                "infer_batch_size": 3,
                "strategy_args": {"strategy_name": "megatron_infer"},
            }
        },
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        3,
    ),
    (
        {
            "reference": {
                "model_args": {"dtype": "bf16"},
                "device_mapping": [0, 1],
                "strategy_args": {"strategy_name": "hf_infer"},
            }
        },
        "actor_rollout_ref.ref.fsdp_config.dtype",
        "bf16",
    ),
    ({}, "trainer.nnodes", 1),
    ({}, "trainer.n_gpus_per_node", 2),
    (
        {
            "actor_train.device_mapping": "list(range(0,16))",
            "actor_infer.device_mapping": "list(range(0,16))",
            "num_gpus_per_node": 8,
            "actor_train.training_args.gradient_accumulation_steps": 1,
            "rollout_batch_size": 16,
        },
        "trainer.nnodes",
        2,
    ),
    (
        {
            "actor_train.device_mapping": "[0, 1, 2, 3]",
            "actor_infer.device_mapping": "[0,1,2,3]",
            "actor_train.training_args.gradient_accumulation_steps": 2,
        },
        "trainer.n_gpus_per_node",
        4,
    ),
]

CRITIC = {
    "adv_estimator": "gae",
    "reward_pretrain": "/models/critic",
    "critic": {
        "model_args": {"dtype": "bf16", "disable_gradient_checkpointing": True},
        "training_args": {
            "learning_rate": 1.0e-5,
            "weight_decay": 0,
            "per_device_train_batch_size": 2,
            "gradient_accumulation_steps": 8,
            "warmup_steps": 5,
        },
        "strategy_args": {"strategy_name": "megatron_train"},
        "device_mapping": [0, 1],
        "infer_batch_size": 8,
    },
    "value_clip": 0.3,
    "whiten_advantages": True,
}

CRITIC_CASES = [
    ("critic.enable", True),
    ("critic.model.path", "/models/critic"),
    ("critic.model.fsdp_config.dtype", "bf16"),
    ("critic.model.enable_gradient_checkpointing", False),
    ("critic.optim.lr", 1e-5),
    ("critic.optim.weight_decay", 0),
    ("critic.optim.lr_warmup_steps", 5),
    ("critic.ppo_mini_batch_size", 8),
    ("critic.ppo_micro_batch_size_per_gpu", 2),
    ("critic.forward_micro_batch_size_per_gpu", 8),
    ("critic.cliprange_value", 0.3),
    ("critic.strategy", "fsdp2"),
    ("algorithm.adv_estimator", "gae"),
]


def _id(case) -> str:
    changes, key, _ = case
    return f"{','.join(changes) or 'default'}->{key}"


@pytest.mark.parametrize(("changes", "key", "expected"), CASES, ids=[_id(c) for c in CASES])
def test_roll_key_maps_to_verl_key(base, changes, key, expected):
    result = validate(with_keys(base, changes))
    assert result.errors == [], [p.render() for p in result.errors]
    assert verl(result, key) == expected


@pytest.mark.parametrize(("key", "expected"), CRITIC_CASES, ids=[c[0] for c in CRITIC_CASES])
def test_critic_worker_maps_to_verl_critic(base, key, expected):
    result = validate({**base, **CRITIC})
    assert result.problems == [], [p.render() for p in result.problems]
    assert verl(result, key) == expected


RLVR_OPTIONS = {
    "adv_estimator": "reinforce",
    "whiten_advantages": True,
    "reward_clip": 10,
    "advantage_clip": 2.0,
    "norm_mean_type": "batch",
    "norm_std_type": "group",
    "max_len_mask": True,
    "difficulty_mask": True,
    "difficulty_low_threshold": 0.1,
    "difficulty_high_threshold": 0.95,
}


def test_rlvr_reward_and_advantage_options_map_to_kuberl_keys(base):
    result = validate(with_keys(base, RLVR_OPTIONS))
    assert result.errors == [], [p.render() for p in result.errors]
    algorithm = result.backend_config.algorithm
    assert algorithm.reward_clip == 10 and algorithm.advantage_clip == 2.0
    assert (algorithm.norm_mean_type, algorithm.norm_std_type) == ("batch", "group")
    assert algorithm.max_len_mask and algorithm.difficulty_mask
    assert (algorithm.difficulty_low_threshold, algorithm.difficulty_high_threshold) == (0.1, 0.95)


def test_rlvr_options_off_by_default_and_zero_reward_clip_is_off(base):
    result = validate(with_keys(base, {"reward_clip": 0}))
    algorithm = result.backend_config.algorithm
    assert algorithm.reward_clip is None and algorithm.advantage_clip is None
    assert not (algorithm.max_len_mask or algorithm.difficulty_mask)


def test_reinforce_maps_to_reinforce_plus_plus(base):
    result = validate(with_keys(base, {"adv_estimator": "reinforce", "whiten_advantages": True}))
    assert verl(result, "algorithm.adv_estimator") == "reinforce_plus_plus"
