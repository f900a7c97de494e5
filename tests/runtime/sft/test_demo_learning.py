"""The learning demo's promise, pinned on its fixed seed: SFT then GRPO visibly improve the model.

After GRPO the training reward's mean over the last 5 steps is at least 0.15 above the first 5,
and greedy validation accuracy after GRPO is at least 0.15 above accuracy after SFT (which beats
the random model), with margin under each of torch's CPU kernel sets (numbers below).
"""

from __future__ import annotations

from kuberl_runtime.demo_learning import run_demo
from tests.runtime.sft.demo_run import DEMO_MARKS, run_on_seed_0

pytestmark = DEMO_MARKS

# Seeded CPU training is deterministic on one machine, not across kernel sets: AVX2, AVX-512 and
# the plain kernels round differently and the run amplifies it (issue 31). The thresholds come
# from the spread across torch's CPU kernels on one machine, not from one run:
#   ATEN_CPU_CAPABILITY=<cap> .venv/bin/python -m pytest tests/runtime/sft/test_demo_learning.py -s
# Measured on seed 0 (Intel Sapphire Rapids, 2 cores; accuracy before SFT -> after SFT -> after
# GRPO, training reward first 5 -> last 5 GRPO steps):
#   avx512 (the machine's own)  0.00 -> 0.42 -> 0.92   0.52 -> 0.87 (+0.35)
#   avx2                        0.00 -> 0.23 -> 0.72   0.32 -> 0.68 (+0.36)
#   default                     0.00 -> 0.66 -> 0.95   0.58 -> 0.85 (+0.27)
#   avx2, MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 (matmuls too)
#                               0.00 -> 0.42 -> 0.89   0.43 -> 0.80 (+0.37)
# so accuracy gain +0.29 to +0.50 and reward gain +0.27 to +0.37: the least of each clears GAIN
# by 0.14 and 0.12. 77-189 s a run on the 2 shared cores at load 7-13.
# Before (30 GRPO steps at temperature 0.3, threshold 0.2 on the reward gain): avx512 0.42 ->
# 0.94 (+0.24), avx2 0.23 -> 0.67 (+0.19, failed), default 0.66 -> 0.94 (+0.14, failed); on an
# AMD EPYC +0.18, +0.10, +0.24.
GAIN = 0.15
"""Least reward gain and accuracy gain (after GRPO - after SFT) the demo must show."""


# One thread per training process (demo_learning.DEMO_THREADS), the random model scored beside SFT.
def test_sft_warm_start_then_grpo_learns(tmp_path):
    result = run_on_seed_0(run_demo, tmp_path)
    assert result.accuracy_before_sft == 0.0
    assert result.accuracy_after_sft > result.accuracy_before_sft
    assert result.sft_losses[-1] < result.sft_losses[0] / 4
    assert result.reward_gain >= GAIN, result.rewards
    assert result.accuracy_after_grpo >= result.accuracy_after_sft + GAIN, result.report()
