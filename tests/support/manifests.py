"""A small valid job and helpers to break it in exactly one place."""

import copy
from typing import Any

_DELETE = object()


def valid_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "kuberl.io/v1alpha1",
        "kind": "RLTrainingJob",
        "metadata": {"name": "t"},
        "spec": {
            "af_output_dir": "/mnt/af/t",
            "workerPools": [
                {"name": "gpu", "nodes": 1, "accelerator": {"type": "nvidia.com/gpu", "perNode": 4}}
            ],
            "backend_config": {
                "data": {"train_files": "/d/train.parquet", "train_batch_size": 8},
                "actor_rollout_ref": {
                    "model": {"path": "/models/m"},
                    "actor": {
                        "ppo_mini_batch_size": 4,
                        "ppo_micro_batch_size_per_gpu": 2,
                        "use_kl_loss": True,
                    },
                    "rollout": {
                        "name": "vllm",
                        "n": 2,
                        "tensor_model_parallel_size": 2,
                        "log_prob_micro_batch_size_per_gpu": 4,
                    },
                    "ref": {"log_prob_micro_batch_size_per_gpu": 4},
                },
                "algorithm": {"adv_estimator": "grpo"},
            },
        },
    }


def valid_sft_manifest() -> dict[str, Any]:
    """An SFT job: verl's SFT config under spec.sft_config, placement from the pool."""
    manifest = valid_manifest()
    spec = manifest["spec"]
    del spec["backend_config"]
    spec["sft_config"] = {
        "data": {"train_files": "/d/sft.parquet", "train_batch_size": 8},
        "model": {"path": "/models/m"},
        "trainer": {"total_epochs": 1, "save_freq": 10},
    }
    return manifest


def with_changes(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Copy ``base`` and set each dotted path (``a.b[0].c``) to its value (DELETE removes it)."""
    doc = copy.deepcopy(base)
    for dotted, value in changes.items():
        node, key = _parent(doc, dotted)
        if value is _DELETE:
            del node[key]
        else:
            node[key] = value
    return doc


def delete() -> object:
    return _DELETE


def _parent(doc: dict, dotted: str) -> tuple[Any, Any]:
    parts: list[Any] = []
    for piece in dotted.split("."):
        name, _, index = piece.partition("[")
        parts.append(name)
        if index:
            parts.append(int(index.rstrip("]")))
    node = doc
    for part in parts[:-1]:
        if isinstance(part, str) and part not in node:
            node[part] = {}
        node = node[part]
    return node, parts[-1]
