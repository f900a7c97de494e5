#!/usr/bin/env bash
# verl 0.9's engine-level keys (written for kuberl's tests): the Ulysses degree under
# fsdp_config, vLLM's CUDA-graph sizes, the prefix grouper, activation offload.
set -xeuo pipefail
SP=${SP:-2}
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=/data/train.parquet \
    data.train_batch_size=16 \
    data.max_prompt_length=512 \
    data.max_response_length=1024 \
    actor_rollout_ref.model.path=/models/tiny \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=768 \
    actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=${SP} \
    actor_rollout_ref.ref.fsdp_config.ulysses_sequence_parallel_size=${SP} \
    actor_rollout_ref.actor.use_prefix_grouper=True \
    actor_rollout_ref.model.enable_activation_offload=True \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.cudagraph_capture_sizes="[8,16,32]" \
    trainer.n_gpus_per_node=2
