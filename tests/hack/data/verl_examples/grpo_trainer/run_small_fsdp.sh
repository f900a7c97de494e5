#!/usr/bin/env bash
# GRPO on two GPUs, FSDP: the shape of verl v0.9's launchers (written for kuberl's tests).
set -xeuo pipefail

DEVICE=${DEVICE:-$(python3 -c 'import torch_npu' 2>/dev/null && echo npu || echo gpu)}
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen2.5-0.5B-Instruct}
train_batch_size=${TRAIN_BATCH_SIZE:-16}
actor_lr=${ACTOR_LR:-1e-6}

case "${DEVICE}" in
    gpu) rollout_tp=1 ;;
    npu) rollout_tp=4 ;;
esac

DATA=(
    algorithm.adv_estimator=grpo
    data.train_files="['$HOME/data/a.parquet', '$HOME/data/b.parquet']"
    data.val_files=$HOME/data/test.parquet
    data.train_batch_size=${train_batch_size}
    data.max_prompt_length=256
    data.max_response_length=512
)
ACTOR=(
    actor_rollout_ref.model.path="$MODEL_PATH"
    actor_rollout_ref.actor.optim.lr=${actor_lr}
    actor_rollout_ref.actor.ppo_mini_batch_size=8
    actor_rollout_ref.actor.use_dynamic_bsz=True
    actor_rollout_ref.actor.use_kl_loss=True
    actor_rollout_ref.rollout.name=vllm
    actor_rollout_ref.rollout.tensor_model_parallel_size=${rollout_tp}
    actor_rollout_ref.rollout.n=4
    ~actor_rollout_ref.rollout.engine_kwargs.trtllm
)
TRAINER=(
    trainer.logger='["console","wandb"]'
    trainer.n_gpus_per_node=2
    trainer.nnodes=1
    hydra.run.dir=/tmp/outputs
)

python3 -m verl.trainer.main_ppo "${DATA[@]}" "${ACTOR[@]}" "${TRAINER[@]}" "$@"
