#!/usr/bin/env bash
# Another training engine chosen by a Hydra group (written for kuberl's tests).
set -xeuo pipefail
python3 -m verl.trainer.main_ppo \
    model_engine=megatron \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.model.path=/models/tiny
