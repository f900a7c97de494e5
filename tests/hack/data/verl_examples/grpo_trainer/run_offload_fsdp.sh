#!/usr/bin/env bash
# Keys kuberl refuses today (written for kuberl's tests).
set -xeuo pipefail
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=/data/train.parquet \
    data.train_batch_size=16 \
    actor_rollout_ref.model.path=/models/tiny \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.model.use_liger=True \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    trainer.n_gpus_per_node=2
