"""A minimal valid ROLL config each test changes one key of."""

import copy

import pytest

BASE = {
    "pretrain": "/models/qwen",
    "rollout_batch_size": 8,
    "num_return_sequences_in_group": 4,
    "prompt_length": 128,
    "response_length": 64,
    "adv_estimator": "grpo",
    "actor_train": {
        "training_args": {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 4},
        "data_args": {
            "template": "native",
            "file_name": "/data/train.jsonl",
            "messages": "messages",
        },
        "strategy_args": {"strategy_name": "megatron_train"},
        "device_mapping": [0, 1],
    },
    "actor_infer": {
        "strategy_args": {"strategy_name": "vllm"},
        "device_mapping": [0, 1],
    },
}


@pytest.fixture
def base() -> dict:
    return copy.deepcopy(BASE)
