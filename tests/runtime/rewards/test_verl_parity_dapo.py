"""The `dapo` reward manager's scores and extra info equal verl 0.9.1's DAPORewardManager."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf
from verl import DataProto
from verl.workers.reward_manager.dapo import DAPORewardManager

from kuberl_runtime.rewards import RewardError
from kuberl_runtime.rewards.dapo import OverlongBuffer, dapo_scores
from kuberl_runtime.rewards.manager import RewardOutput

PROMPT = 4


class DigitTokenizer:
    eos_token = "<eos>"

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(48 + int(i) % 10) for i in ids)


def length_score(data_source, solution_str, ground_truth, extra_info):
    return float(len(solution_str)) / 3


def dict_score(data_source, solution_str, ground_truth, extra_info):
    return {"score": float(solution_str.count("1")), "pred": solution_str[-1:]}


def verl_dapo(lengths, width, fn, buffer: OverlongBuffer, max_resp_len):
    rows = len(lengths)
    attention = torch.zeros(rows, PROMPT + width, dtype=torch.long)
    attention[:, :PROMPT] = 1
    for i, n in enumerate(lengths):
        attention[i, PROMPT : PROMPT + n] = 1
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.zeros(rows, PROMPT, dtype=torch.long),
            "responses": torch.arange(rows * width).reshape(rows, width),
            "attention_mask": attention,
        },
        non_tensors={
            "reward_model": np.array([{"ground_truth": "7"}] * rows, dtype=object),
            "data_source": np.array(["src"] * rows, dtype=object),
            "extra_info": np.array([{} for _ in range(rows)], dtype=object),
        },
    )
    cfg = OmegaConf.create(vars(buffer))
    manager = DAPORewardManager(
        DigitTokenizer(), 0, compute_score=fn, max_resp_len=max_resp_len, overlong_buffer_cfg=cfg
    )
    out = manager(data, return_dict=True)
    return out["reward_tensor"].sum(-1).tolist(), dict(out["reward_extra_info"])


def ours(lengths, width, fn, buffer: OverlongBuffer, max_resp_len):
    texts = [
        DigitTokenizer().decode(range(i * width, i * width + n)) for i, n in enumerate(lengths)
    ]
    results = [fn("src", text, "7", {}) for text in texts]
    numeric = [not isinstance(r, dict) for r in results]
    scores = [r["score"] if isinstance(r, dict) else r for r in results]
    extra = {"pred": [r["pred"] for r in results]} if not any(numeric) else {}
    return dapo_scores(RewardOutput(scores, extra), numeric, lengths, buffer, max_resp_len)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=6),
    buffer_len=st.integers(1, 12),
    factor=st.floats(0.0, 3.0),
    enable=st.booleans(),
    log=st.booleans(),
    dict_results=st.booleans(),
)
# A factor that underflows float32: verl's penalty is −0.0 (not overlong); a float64 one is not.
@example(lengths=[11], buffer_len=3, factor=5e-324, enable=True, log=True, dict_results=False)
@example(lengths=[12, 10], buffer_len=3, factor=1e-45, enable=True, log=True, dict_results=True)
def test_dapo_equals_verl(lengths, buffer_len, factor, enable, log, dict_results):
    width = max_resp_len = 12
    buffer = OverlongBuffer(enable=enable, len=buffer_len, penalty_factor=factor, log=log)
    fn = dict_score if dict_results else length_score
    verl_scores, verl_extra = verl_dapo(lengths, width, fn, buffer, max_resp_len)
    mine = ours(lengths, width, fn, buffer, max_resp_len)
    assert mine.scores == pytest.approx(verl_scores, abs=1e-6)
    assert sorted(mine.extra_info) == sorted(verl_extra)
    for key, values in verl_extra.items():
        plain = [v.item() if isinstance(v, torch.Tensor) else v for v in values]
        assert mine.extra_info[key] == pytest.approx(plain, abs=1e-6), key


def test_dapo_refuses_what_verl_asserts():
    with pytest.raises(RewardError, match="max_resp_len must be set"):
        OverlongBuffer(enable=True, len=4).check(None)
    with pytest.raises(RewardError, match="len must be positive"):
        OverlongBuffer(enable=True, len=0).check(8)
    with pytest.raises(RewardError, match=r"at least overlong_buffer_cfg\.len"):
        OverlongBuffer(enable=True, len=9).check(8)
    OverlongBuffer(enable=False).check(None)
