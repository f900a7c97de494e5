"""The tool-use demo's data and tokenizer (``testing/tool_calls.py``): verl's tool-agent rows,
SFT conversations of another distribution, and a hermes call that is 11 tokens and decodes back
to the text the rollout parses."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kuberl_runtime.rollout.tool_calls import parse_hermes
from kuberl_runtime.testing.tool_calls import (
    RL_FIRST,
    SFT_FIRST,
    tool_call,
    tool_tokenizer,
    write_tool_datasets,
)
from kuberl_runtime.tools import CalculatorTool

pytestmark = pytest.mark.runtime

TOKENIZER_DIR = Path(__file__).resolve().parents[3] / "examples" / "tokenizer" / "arith-tokenizer"


def test_rows_are_verls_tool_agent_rows_and_sft_is_another_distribution(tmp_path):
    paths = write_tool_datasets(tmp_path, sft_size=200, rl_size=50, test_size=20, tool_fraction=0.3)
    test = [json.loads(line) for line in paths["rl_test"].read_text().splitlines()]
    train = [json.loads(line) for line in paths["rl_train"].read_text().splitlines()]
    assert (len(train), len(test)) == (50, 20)
    row = test[0]
    assert row["agent_name"] == "tool_agent"
    assert row["extra_info"]["tools_kwargs"] == {"calculator": {"create_kwargs": {}}}
    a, b = (int(x) for x in row["prompt"][0]["content"][len("What is ") : -1].split(" * "))
    assert row["reward_model"]["ground_truth"] == str(a * b) and RL_FIRST[0] <= a <= RL_FIRST[1]
    assert not {r["extra_info"]["question"] for r in train} & {
        r["extra_info"]["question"] for r in test
    }
    sft = pq.read_table(paths["sft_train"]).to_pylist()
    called = [r["messages"] for r in sft if len(r["messages"]) == 4]
    assert 40 <= len(called) <= 80  # about 30% of 200 call the tool
    question = called[0][0]["content"]
    a, b = (int(x) for x in question[len("What is ") : -1].split(" * "))
    assert SFT_FIRST[0] <= a <= SFT_FIRST[1]
    assert [m["role"] for m in called[0]] == ["user", "assistant", "tool", "assistant"]
    assert called[0][2]["content"] == str(a * b) and called[0][3]["content"] == f"#### {a * b}"


def test_the_call_is_eleven_tokens_and_runs_the_calculator():
    tokenizer = tool_tokenizer(TOKENIZER_DIR)
    ids = tokenizer.encode(tool_call(523, 47), add_special_tokens=False)
    assert len(ids) == 11
    text = tokenizer.decode(ids, skip_special_tokens=False)
    assert text == tool_call(523, 47)
    (call,) = parse_hermes(text)
    assert CalculatorTool().execute("i", call.arguments)[0] == str(523 * 47)
