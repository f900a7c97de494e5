"""`kuberl plan` knows the multi-turn length budget: prompt + every turn within max_model_len, the
dry run's rows as long as the longest trajectory, and a warning when one round of tool responses
can fill the trajectory budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch.distributed as dist

from kuberl_cli.main import main
from kuberl_runtime.config import load_run_config
from kuberl_runtime.dryrun.from_plan import dry_run_input
from kuberl_runtime.dryrun.multi_turn import turn_budget
from kuberl_runtime.dryrun.shapes import MODEL_SHAPES

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.skipif(dist.is_initialized(), reason="needs a process without a group"),
]
DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo.yaml"
R = "actor_rollout_ref.rollout."
MULTI_TURN = [
    "data.return_raw_chat=true",
    R + "multi_turn.enable=true",
    R + "multi_turn.max_assistant_turns=3",
    R + "multi_turn.tool_config_path=/tools/calculator.yaml",
    R + "agent.default_agent_loop=tool_agent",
    R + "prompt_length=96",
    R + "response_length=160",
    "data.max_prompt_length=96",
    "data.max_response_length=160",
]


def test_the_longest_trajectory_is_the_dry_runs_row() -> None:
    plan = load_run_config(
        str(DEMO), [*MULTI_TURN, R + "multi_turn.max_tool_response_length=32"]
    ).plan
    budget = turn_budget(plan)
    assert budget is not None and budget.warnings == ()
    assert (budget.prompt_length, budget.response_length) == (96, 160)
    assert budget.longest_sequence == 256 <= budget.max_model_len
    rows = dry_run_input(plan, MODEL_SHAPES["Qwen2.5-0.5B"], "H100")
    assert rows.prompt_length + rows.response_length == budget.longest_sequence
    assert budget.tool_round_chars == 32 + len("...(truncated)...")
    assert turn_budget(load_run_config(str(DEMO), []).plan) is None  # single-turn: no budget


def test_kuberl_plan_prints_the_budget_and_warns_when_a_tool_round_fills_it(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**MODEL_SHAPES["Qwen2.5-0.5B"], "num_hidden_layers": 5}))
    sets = [*MULTI_TURN, R + "multi_turn.max_tool_response_length=256"]
    rc = main(["plan", str(DEMO), "--model-config", str(config), *(f"--set={s}" for s in sets)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "prompt 96 + response 160" in out
    assert "prompt 96 + all turns 160 (response_length) = longest trajectory 256 tokens" in out
    assert "<= max_model_len 256" in out
    assert "turns: assistant 3, tool no limit; one tool round up to 273 characters" in out
    assert "warning: one round of tool responses (max_parallel_calls=1 x " in out
    assert "max_tool_response_length=256 characters) can fill the whole trajectory budget" in out
