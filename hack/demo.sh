#!/usr/bin/env bash
# `make demo`, stage 1: the full stack (control plane + operator + Ray + CPU training) is not
# wired together yet. What exists today is the typed job spec, its validator and the generated
# CRD, so that is what this demo shows — honestly labelled as such.
set -euo pipefail
cd "$(dirname "$0")/.."
kuberl=.venv/bin/kuberl

echo "== kuberl demo (stage 1 of the end-to-end demo: spec, validation, CRD) =="
echo
echo "-- Validating the example jobs:"
$kuberl validate examples/*.yaml
echo
echo "-- A job with mistakes is rejected with every problem at once:"
cat > /tmp/kuberl-demo-bad.yaml <<'YAML'
af_output_dir: /mnt/af/demo
backend_config:
  data: {trian_files: /data/train.parquet, train_batch_size: 6}
  actor_rollout_ref:
    model: {path: /models/tiny}
    actor: {ppo_mini_batch_size: 8, ppo_micro_batch_size_per_gpu: 3}
    rollout: {name: hf, n: 1, log_prob_micro_batch_size_per_gpu: 2}
  algorithm: {adv_estimator: grpoo}
  trainer: {nnodes: 1, n_gpus_per_node: 4}
YAML
$kuberl validate /tmp/kuberl-demo-bad.yaml || true
echo
echo "-- The generated CRD (first lines of $(wc -l < crds/rltrainingjobs.kuberl.io.yaml) total):"
head -n 12 crds/rltrainingjobs.kuberl.io.yaml
echo
echo "Not yet in this demo: local control plane, operator, Ray head and the CPU GRPO run."
