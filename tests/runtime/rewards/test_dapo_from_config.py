"""`reward_manager: dapo` from a job's config: its overlong penalty reaches the reward stage.

The config goes through the runtime's edge (validation, run plan) to the manager the trainer
builds (`reward_manager_for`), and the trainer's reward stage (`score_batch`) scores responses
that end at different lengths. verl 0.9.1's DAPORewardManager, given the same token ids, scorer
and reward_kwargs, is the oracle for the token-level scores and the extra info.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl import DataProto
from verl.workers.reward_manager.dapo import DAPORewardManager

from kuberl_runtime.config import run_config_from_dict
from kuberl_runtime.data.dataset import PromptSample
from kuberl_runtime.rewards import reward_manager_for
from kuberl_runtime.rollout.base import build_response_batch
from kuberl_runtime.trainer.rewards import score_batch

ROOT = Path(__file__).resolve().parents[3]
DEMO = yaml.safe_load((ROOT / "examples" / "demo.yaml").read_text())
TOKENIZER = ROOT / "examples" / "tokenizer" / "arith-tokenizer"
MAX_RESP_LEN = 10
BUFFER = {"enable": True, "len": 4, "penalty_factor": 0.5, "log": True}
SCORER = """
def compute_score(data_source, solution_str, ground_truth, extra_info):
    return 1.0 if solution_str.strip().endswith(ground_truth) else 0.25
"""


def _config(tmp_path: Path, manager: str) -> dict:
    tree = copy.deepcopy(DEMO)
    scorer = tmp_path / "scorer.py"
    scorer.write_text(SCORER)
    tree["data"]["max_response_length"] = MAX_RESP_LEN
    tree["custom_reward_function"] = {"path": str(scorer)}
    tree["reward_model"] = {
        "reward_manager": manager,
        "reward_kwargs": {"overlong_buffer_cfg": dict(BUFFER), "max_resp_len": MAX_RESP_LEN},
    }
    return tree


def _batch(tokenizer) -> tuple:
    """Six responses of 2 … 10 valid tokens (EOS placed early on most rows)."""
    gen = torch.Generator().manual_seed(3)
    rows, prompt_length = 6, 5
    prompts = torch.randint(5, len(tokenizer), (rows, prompt_length), generator=gen)
    responses = torch.randint(5, len(tokenizer), (rows, MAX_RESP_LEN), generator=gen)
    for row, eos_at in enumerate([1, 4, 5, 6, 8, None]):
        if eos_at is not None:
            responses[row, eos_at] = tokenizer.eos_token_id
    batch = build_response_batch(
        prompts,
        torch.ones_like(prompts),
        responses,
        eos_ids=[tokenizer.eos_token_id],
        pad_id=tokenizer.pad_token_id,
    )
    samples = [
        PromptSample(index=i, prompt_ids=[], data_source="kuberl/arith", ground_truth=str(i % 3))
        for i in range(rows)
    ]
    batch.objects["sample"] = samples
    return batch, samples


def _verl(tokenizer, batch, samples, scorer_path: Path):
    namespace: dict = {}
    exec(scorer_path.read_text(), namespace)  # the same scorer file the job names
    data = DataProto.from_dict(
        tensors={
            "prompts": batch["prompts"],
            "responses": batch["responses"],
            "attention_mask": batch["attention_mask"],
        },
        non_tensors={
            "reward_model": np.array([{"ground_truth": s.ground_truth} for s in samples]),
            "data_source": np.array([s.data_source for s in samples], dtype=object),
            "extra_info": np.array([{} for _ in samples], dtype=object),
        },
    )
    manager = DAPORewardManager(
        tokenizer,
        0,
        compute_score=namespace["compute_score"],
        max_resp_len=MAX_RESP_LEN,
        overlong_buffer_cfg=OmegaConf.create(BUFFER),
    )
    out = manager(data, return_dict=True)
    return out["reward_tensor"], dict(out["reward_extra_info"])


def test_the_overlong_penalty_reaches_the_reward_stage_as_verls(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    run = run_config_from_dict(_config(tmp_path, "dapo"))
    batch, samples = _batch(tokenizer)
    lengths = batch["response_mask"].sum(-1).tolist()
    assert max(lengths) == MAX_RESP_LEN and min(lengths) < MAX_RESP_LEN - BUFFER["len"]

    scores, extra = score_batch(batch, reward_manager_for(run.plan.reward_function), tokenizer)
    theirs, their_extra = _verl(tokenizer, batch, samples, tmp_path / "scorer.py")
    torch.testing.assert_close(scores, theirs, atol=1e-6, rtol=0)
    assert sorted(extra) == sorted(their_extra) == ["acc", "overlong", "overlong_reward"]
    for key, values in their_extra.items():
        plain = [v.item() if isinstance(v, torch.Tensor) else v for v in values]
        assert extra[key] == pytest.approx(plain, abs=1e-6), key
    assert any(extra["overlong"]) and not all(extra["overlong"])


def test_the_naive_manager_of_the_same_config_has_no_penalty(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    tree = _config(tmp_path, "naive")
    tree["reward_model"]["reward_kwargs"]["overlong_buffer_cfg"]["enable"] = False
    run = run_config_from_dict(tree)
    batch, _ = _batch(tokenizer)
    scores, extra = score_batch(batch, reward_manager_for(run.plan.reward_function), tokenizer)
    dapo = run_config_from_dict(_config(tmp_path, "dapo"))
    penalised, _ = score_batch(batch, reward_manager_for(dapo.plan.reward_function), tokenizer)
    assert extra == {}
    lengths = batch["response_mask"].sum(-1)
    over = lengths > MAX_RESP_LEN - BUFFER["len"]
    assert (penalised.sum(-1)[over] < scores.sum(-1)[over]).all()
    torch.testing.assert_close(penalised.sum(-1)[~over], scores.sum(-1)[~over])
