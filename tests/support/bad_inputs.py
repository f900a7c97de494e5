"""Bad job manifests, each one mistake: what is changed, the path the error must name, and a
phrase its message or hint must contain. The validator's unit tests and the API-server tests
(schema, CEL, the operator's Validated condition) share this one table."""

from support.manifests import delete

BC = "spec.backend_config"

# (what is changed, the path the error must name, a phrase its message or hint must contain)
CASES = [
    (
        {f"{BC}.data.trian_files": "/x"},
        f"{BC}.data.trian_files",
        f"did you mean {BC}.data.train_files?",
    ),
    (
        {f"{BC}.actor_rollout_ref.actor.ppo_mini_batchsize": 4},
        f"{BC}.actor_rollout_ref.actor.ppo_mini_batchsize",
        "ppo_mini_batch_size",
    ),
    (
        {f"{BC}.algorithm.adv_estimator": "grpoo"},
        f"{BC}.algorithm.adv_estimator",
        "did you mean 'grpo'",
    ),
    ({f"{BC}.data.train_batch_size": "8"}, f"{BC}.data.train_batch_size", "remove the quotes"),
    ({f"{BC}.data.train_batch_size": 0}, f"{BC}.data.train_batch_size", "greater than 0"),
    ({f"{BC}.data.train_batch_size": -8}, f"{BC}.data.train_batch_size", "greater than 0"),
    ({f"{BC}.data.train_batch_size": 10**12}, f"{BC}.data.train_batch_size", "less than or equal"),
    ({f"{BC}.data.train_batch_size": 7}, f"{BC}.data.train_batch_size", "cannot be split evenly"),
    ({f"{BC}.data.train_files": delete()}, f"{BC}.data.train_files", "required"),
    ({f"{BC}.actor_rollout_ref.model": {}}, f"{BC}.actor_rollout_ref.model.path", "required"),
    ({"spec.af_output_dir": delete()}, "spec.af_output_dir", "required"),
    ({"spec.af_output_dir": "relative/dir"}, "spec.af_output_dir", "an absolute path"),
    ({"spec.workerPools": []}, "spec.workerPools", "at least 1"),
    (
        {"spec.workerPools[0].accelerator.type": "nvidia.com/gpuu"},
        "spec.workerPools[0].accelerator.type",
        "did you mean 'nvidia.com/gpu'",
    ),
    (
        {"spec.workerPools[0].accelerator.perNode": 0},
        "spec.workerPools[0].accelerator.perNode",
        "at least one accelerator",
    ),
    ({"spec.workerPools[0].nodes": 0}, "spec.workerPools[0].nodes", "greater than or equal to 1"),
    ({"spec.workerPools[0].name": "GPU_Pool"}, "spec.workerPools[0].name", "as in a DNS label"),
    ({"spec.workerPools[0].gpus": 8}, "spec.workerPools[0].gpus", "valid keys here"),
    ({"spec.runPolicy.backoffLimit": -1}, "spec.runPolicy.backoffLimit", "greater than or equal"),
    ({"spec.run_policy": {"backoffLimit": 1}}, "spec.run_policy", "did you mean spec.runPolicy?"),
    (
        {f"{BC}.actor_rollout_ref.actor.ppo_mini_batch_size": 16},
        f"{BC}.actor_rollout_ref.actor.ppo_mini_batch_size",
        "larger than data.train_batch_size",
    ),
    (
        {f"{BC}.actor_rollout_ref.actor.ppo_mini_batch_size": 1},
        f"{BC}.actor_rollout_ref.actor.ppo_mini_batch_size",
        "split evenly over 4 data-parallel",
    ),
    (
        {
            f"{BC}.actor_rollout_ref.actor.ppo_mini_batch_size": 8,  # 8 x n 2 / 4 ranks = 4
            f"{BC}.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 3,
        },
        f"{BC}.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
        "use a divisor of 4",
    ),
    (
        {f"{BC}.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": delete()},
        f"{BC}.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
        "required unless use_dynamic_bsz",
    ),
    (
        {f"{BC}.actor_rollout_ref.actor.ppo_micro_batch_size": 8},
        f"{BC}.actor_rollout_ref.actor.ppo_micro_batch_size",
        "remove ppo_micro_batch_size",
    ),
    (
        {f"{BC}.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": delete()},
        f"{BC}.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        "reference policy",
    ),
    (
        {f"{BC}.actor_rollout_ref.rollout.tensor_model_parallel_size": 8},
        f"{BC}.actor_rollout_ref.rollout.tensor_model_parallel_size",
        "exceeds the 4 accelerators",
    ),
    (
        {f"{BC}.actor_rollout_ref.rollout.tensor_model_parallel_size": 3},
        f"{BC}.actor_rollout_ref.rollout.tensor_model_parallel_size",
        "not a multiple",
    ),
    ({f"{BC}.trainer.nnodes": 2}, f"{BC}.trainer.nnodes", "does not match the worker pools (1)"),
    ({f"{BC}.trainer.n_gpus_per_node": 8}, f"{BC}.trainer.n_gpus_per_node", "set it to 4"),
    (
        {f"{BC}.trainer.resume_mode": "resume_path"},
        f"{BC}.trainer.resume_from_path",
        "required when resume_mode is resume_path",
    ),
    (
        {f"{BC}.trainer.resume_mode": "resume_path", f"{BC}.trainer.resume_from_path": "/ckpt/x"},
        f"{BC}.trainer.resume_from_path",
        "global_step_N",
    ),
    (
        {f"{BC}.trainer.default_local_dir": "/elsewhere/ckpt"},
        f"{BC}.trainer.default_local_dir",
        "must live under af_output_dir",
    ),
    (
        {f"{BC}.algorithm.adv_estimator": "gae", f"{BC}.critic.enable": False},
        f"{BC}.critic.enable",
        "gae needs a critic",
    ),
    (
        {
            f"{BC}.algorithm.adv_estimator": "grpo_passk",
            f"{BC}.actor_rollout_ref.rollout.n": 1,
            f"{BC}.data.train_batch_size": 8,
        },
        f"{BC}.actor_rollout_ref.rollout.n",
        "set rollout.n to 2 or more",
    ),
    (
        {f"{BC}.actor_rollout_ref.actor.clip_ratio_c": 1.0},
        f"{BC}.actor_rollout_ref.actor.clip_ratio_c",
        "greater than 1",
    ),
    (
        {f"{BC}.actor_rollout_ref.actor.loss_agg_mode": "token_mean"},
        f"{BC}.actor_rollout_ref.actor.loss_agg_mode",
        "did you mean 'token-mean'",
    ),
    ({f"{BC}.algorithm.kl_ctrl.horizon": 0}, f"{BC}.algorithm.kl_ctrl.horizon", "greater than 0"),
    (
        {
            f"{BC}.actor_rollout_ref.actor.ulysses_sequence_parallel_size": 2,
            f"{BC}.actor_rollout_ref.model.use_remove_padding": False,
        },
        f"{BC}.actor_rollout_ref.actor.ulysses_sequence_parallel_size",
        "use_remove_padding: true",
    ),
    (
        {
            f"{BC}.actor_rollout_ref.rollout.val_kwargs.do_sample": True,
            f"{BC}.actor_rollout_ref.rollout.val_kwargs.temperature": 0.0,
        },
        f"{BC}.actor_rollout_ref.rollout.val_kwargs.temperature",
        "positive temperature",
    ),
    (
        {f"{BC}.actor_rollout_ref.hybrid_engine": False},
        f"{BC}.actor_rollout_ref.hybrid_engine",
        "only the colocated hybrid engine",
    ),
    (
        {f"{BC}.data.max_response_length": "${data.missing_key}"},
        f"{BC}.data.max_response_length",
        "set data.missing_key",
    ),
    ({f"{BC}.data.val_files": 3}, f"{BC}.data.val_files", "a string or a list of strings"),
    ({f"{BC}.trainer.logger": ["console", "wandbb"]}, f"{BC}.trainer.logger", "must be"),
    (
        {
            f"{BC}.actor_rollout_ref.actor.use_dynamic_bsz": True,
            f"{BC}.actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 100,
        },
        f"{BC}.actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
        "at least 1024",
    ),
    (
        {
            "spec.workerPools[0].accelerator.type": "huawei.com/Ascend910",
            f"{BC}.actor_rollout_ref.rollout.name": "sglang",
        },
        f"{BC}.actor_rollout_ref.rollout.name",
        "CUDA-only",
    ),
    (
        {
            "spec.workerPools[0].accelerator.type": "huawei.com/Ascend910",
            f"{BC}.actor_rollout_ref.model.use_liger": True,
        },
        f"{BC}.actor_rollout_ref.model.use_liger",
        "CUDA-only",
    ),
    (
        {
            "spec.workerPools": [
                {"name": "a", "accelerator": {"type": "nvidia.com/gpu", "perNode": 4}},
                {"name": "a", "accelerator": {"type": "nvidia.com/gpu", "perNode": 4}},
            ]
        },
        "spec.workerPools[1].name",
        "duplicate pool name",
    ),
    (
        {
            "spec.workerPools": [
                {"name": "a", "accelerator": {"type": "nvidia.com/gpu", "perNode": 4}},
                {"name": "b", "accelerator": {"type": "huawei.com/Ascend910", "perNode": 4}},
            ]
        },
        "spec.workerPools",
        "mix accelerator types",
    ),
]
