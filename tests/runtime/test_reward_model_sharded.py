"""The discriminative reward model's sharded init (rank 0 reads, shards broadcast, as the
actor's): on 2 ranks each rank holds half of it and scores like 1 rank with the whole checkpoint
loaded, bit for bit; rank 1 is given a directory with the config alone (no weights to read)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from kuberl_api.plan.standalone import fsdp_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.model_builder import ModelSpec
from kuberl_runtime.reward_model import RewardModelScorer, build_sharded_reward_model
from kuberl_runtime.testing.tiny import save_tiny_model
from kuberl_runtime.trainer.batch import Batch
from support.warm_python import script_env, warm_python

TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "examples" / "tokenizer" / "arith-tokenizer"
TEXTS = ["1+2=3", "7*6=42", "9-4=5 and more", "0"]


def _rows() -> Batch:
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    width = max(len(row) for row in ids)
    input_ids = torch.full((len(ids), width), tokenizer.pad_token_id)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, row in enumerate(ids):
        input_ids[i, : len(row)], mask[i, : len(row)] = torch.tensor(row), 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return Batch({"input_ids": input_ids, "attention_mask": mask, "position_ids": positions})


def _rank(rank: int, world: int, store: str, model: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world)
    built = build_sharded_reward_model(
        ModelSpec(path=model), torch.float32, fsdp_plan(), Device("cpu"), torch.device("cpu"),
        is_main=rank == 0,
    )  # fmt: skip
    local = sum((p.to_local() if isinstance(p, DTensor) else p).numel() for p in built.parameters())
    scores = RewardModelScorer(built, micro_batch_size=2).score(_rows())
    print(json.dumps({"rank": rank, "scores": scores.tolist(), "local": local}))
    dist.destroy_process_group()


def _run(world: int, tmp: Path, model: Path) -> list[dict]:
    store = tmp / f"store{world}"
    config_only = tmp / "config-only"
    config_only.mkdir(exist_ok=True)
    shutil.copy(model / "config.json", config_only / "config.json")
    paths = (model, config_only)
    procs = [
        warm_python().start(
            [__file__, str(rank), str(world), str(store), str(paths[rank > 0])],
            script_env(),
        )
        for rank in range(world)
    ]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * world, [err[-3000:] for _, err in outputs]
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


def test_two_ranks_hold_half_and_score_like_one(tmp_path):
    lm = save_tiny_model(tmp_path / "lm", AutoTokenizer.from_pretrained(TOKENIZER_DIR), seed=3)
    torch.manual_seed(3)  # the score head, saved with the rest: the RM's checkpoint is complete
    whole = AutoModelForSequenceClassification.from_pretrained(lm, num_labels=1).eval()
    model = tmp_path / "rm"
    whole.save_pretrained(model)
    with torch.no_grad():
        batch = _rows()
        expected = whole(**{k: batch[k] for k in ("input_ids", "attention_mask")}).logits[:, 0]
    one, two = _run(1, tmp_path, model), _run(2, tmp_path, model)
    numel = sum(p.numel() for p in whole.parameters())
    assert one[0]["local"] == numel
    assert sum(r["local"] for r in two) == numel and max(r["local"] for r in two) < numel
    assert one[0]["scores"] == two[0]["scores"] == two[1]["scores"]
    torch.testing.assert_close(torch.tensor(one[0]["scores"]), expected)


if __name__ == "__main__":
    _rank(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
