"""The tool-use demo's promise, pinned on its fixed seed: after SFT on transcripts of another
distribution the tiny model mostly guesses; GRPO with the calculator makes it call the tool and
answer the test products right (greedy validation before and after GRPO).

    .venv/bin/python -m pytest tests/runtime/sft/test_demo_tool.py -s   # prints the report

Measured on seed 0 (Intel, 2 shared cores at load 20-30, the machine's own kernels): tool use
0.00 -> 1.00, accuracy 0.00 -> 0.55, GRPO training reward 0.10 -> 0.60, calls per rollout
0.24 -> 0.97; 666-769 s under that load (about 2 minutes at the fastest step times seen);
the same figures in two runs. Other CPU
kernel sets (ATEN_CPU_CAPABILITY) are not measured yet.
"""

from __future__ import annotations

from kuberl_runtime.demo_tool import run_demo
from tests.runtime.sft.demo_run import DEMO_MARKS, run_on_seed_0

pytestmark = DEMO_MARKS

GAIN = 0.3
"""Least rise of validation tool use and of accuracy that the demo must show."""


def test_sft_then_grpo_teaches_the_model_to_call_the_calculator(tmp_path):
    result = run_on_seed_0(run_demo, tmp_path)
    assert result.sft_losses[-1] < result.sft_losses[0] / 4
    assert result.tool_use_after >= result.tool_use_before + GAIN, result.report()
    assert result.accuracy_after >= result.accuracy_before + GAIN, result.report()
