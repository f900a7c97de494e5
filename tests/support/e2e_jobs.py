"""The e2e tier's training jobs: examples/demo.yaml shrunk to under a second a step on an idle
core, with the trainer tests' digit reward so that the policy really moves (the arithmetic reward
of a random tiny model is all zeros, and zero advantages would leave the weights untouched); and
examples/demo-sft.yaml as an SFT job."""

import json
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DIGIT_REWARD = REPO / "tests" / "runtime" / "trainer" / "digit_reward.py"


def demo_job(
    name: str,
    af_output_dir: Path,
    model: Path,
    total_steps: int,
    save_freq: int,
    experiment: str = "e2e-arith",
) -> dict[str, Any]:
    """examples/demo.yaml as a job: tiny, CPU, with a reward that moves the policy."""
    config = yaml.safe_load((REPO / "examples" / "demo.yaml").read_text())
    data, roles, trainer = config["data"], config["actor_rollout_ref"], config["trainer"]
    data.update(train_files=str(REPO / "examples" / "data" / "arith" / "train.parquet"))
    data.update(train_batch_size=4, max_response_length=12)
    for key in ("val_files", "val_max_samples"):
        data.pop(key)
    roles["model"]["path"] = str(model)
    roles["actor"].update(ppo_mini_batch_size=2, ppo_micro_batch_size_per_gpu=2)
    roles["rollout"]["n"] = 2
    config["custom_reward_function"] = {"path": str(DIGIT_REWARD)}
    for key in ("device", "nnodes", "n_gpus_per_node"):  # the worker pool decides placement
        trainer.pop(key)
    trainer.update(
        total_training_steps=total_steps,
        save_freq=save_freq,
        test_freq=-1,
        val_before_train=False,
        logger=["console"],
        experiment_name=experiment,
        default_local_dir="checkpoints",
    )
    return _job(name, af_output_dir, "backend_config", config)


def sft_job(
    name: str,
    af_output_dir: Path,
    model: Path,
    train_files: Path,
    total_steps: int,
    save_freq: int,
    experiment: str = "e2e-sft",
) -> dict[str, Any]:
    """examples/demo-sft.yaml as an SFT job (spec.sft_config): tiny, CPU, placed by its pool."""
    config = yaml.safe_load((REPO / "examples" / "demo-sft.yaml").read_text())
    data, trainer = config["data"], config["trainer"]
    data.update(train_files=str(train_files), train_batch_size=8, micro_batch_size_per_gpu=4)
    data.pop("val_files")
    config["model"]["path"] = str(model)
    for key in ("device", "nnodes", "n_gpus_per_node"):  # the worker pool decides placement
        trainer.pop(key)
    trainer.update(
        total_training_steps=total_steps,
        save_freq=save_freq,
        test_freq=-1,
        max_ckpt_to_keep=2,
        resume_mode="auto",
        experiment_name=experiment,
        default_local_dir="checkpoints",
    )
    return _job(name, af_output_dir, "sft_config", config)


def _job(name: str, af_output_dir: Path, tree: str, config: dict[str, Any]) -> dict[str, Any]:
    """An RLTrainingJob on one 2-CPU pool carrying `config` under `spec.<tree>`."""
    return {
        "apiVersion": "kuberl.io/v1alpha1",
        "kind": "RLTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "af_output_dir": str(af_output_dir),
            "workerPools": [{"name": "cpu", "nodes": 1, "cpu": "2", "memory": "4Gi"}],
            tree: config,
            "runPolicy": {"backoffLimit": 2},
        },
    }


def read_metrics(af_output_dir: Path) -> dict[int, dict[str, float]]:
    """The last logged metrics of each step, wall-clock measurements left out."""
    steps: dict[int, dict[str, float]] = {}
    for line in (af_output_dir / "logs" / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        steps[record.pop("step")] = {
            k: v
            for k, v in record.items()
            if not k.startswith(("timing_s/", "timing_per_token_ms/", "perf/"))
        }
    return steps
