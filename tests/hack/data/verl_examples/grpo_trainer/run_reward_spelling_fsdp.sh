#!/usr/bin/env bash
# verl 0.9's reward.* spelling and a raised file limit (written for kuberl's tests).
set -xeuo pipefail
ulimit -n 65535

ADAPTER=${LORA_ADAPTER_PATH:?set LORA_ADAPTER_PATH}
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=/data/train.parquet \
    data.train_batch_size=16 \
    actor_rollout_ref.model.path=/models/tiny \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    +actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton \
    reward.reward_manager.name=dapo \
    reward.custom_reward_function.path=/rewards/score.py \
    trainer.logger="['console','tracking']" \
    trainer.n_gpus_per_node=2 \
    trainer.project_name="adapter_${ADAPTER##*/}"
