"""`kuberl train examples/vl-demo.yaml` runs GRPO on image prompts on CPU (2 ranks, packed).

The demo's own config, pointed at a freshly built tiny Qwen2.5-VL and dot pictures, with a reward
a random model earns by chance (the digit share) so the policy gradient is not zero: the run
finishes its steps, the language model's weights move, and with freeze_vision_tower the vision
encoder's weights are exactly the initial ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

REPO = Path(__file__).resolve().parents[3]
DIGIT_REWARD = REPO / "tests" / "runtime" / "trainer" / "digit_reward.py"


def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


@pytest.mark.runtime
def test_vl_demo_trains_on_images_with_a_frozen_vision_tower(tmp_path):
    from kuberl_runtime.testing.dots import write_dot_datasets
    from kuberl_runtime.testing.tiny_vl import save_tiny_vl

    model_dir = save_tiny_vl(tmp_path / "tiny-vl")
    train, test = write_dot_datasets(tmp_path / "dots", num_train=16, num_test=4)
    config = yaml.safe_load((REPO / "examples" / "vl-demo.yaml").read_text())
    config["data"].update(train_files=str(train), val_files=str(test))
    config["actor_rollout_ref"]["model"]["path"] = str(model_dir)
    config["custom_reward_function"] = {"path": str(DIGIT_REWARD)}
    out = tmp_path / "out"
    config["trainer"]["default_local_dir"] = str(out)
    path = tmp_path / "vl.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-m", "kuberl_cli.main", "train", str(path)],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(x) for x in (out / "logs" / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3]
    assert any(x["actor/pg_loss"] != 0 for x in lines)
    assert "val-core/kuberl/dots/reward/mean@1" in lines[-1]
    before, after = _weights(model_dir), _weights(out / "huggingface")
    # Saved in the checkpoint layout: visual.* and model.layers.* (transformers converts names).
    vision = [k for k in before if k.startswith("visual.")]
    language = [k for k in before if k.startswith("model.layers.")]
    assert vision and language
    assert all(torch.equal(before[k], after[k]) for k in vision)
    assert any(not torch.equal(before[k], after[k]) for k in language)
    # The export (and every checkpoint's huggingface/) carries the processor: a next job can
    # start from it with images.
    from transformers import AutoProcessor

    assert AutoProcessor.from_pretrained(out / "huggingface").image_processor is not None
    step = out / "global_step_3"
    assert (step / "actor" / "huggingface" / "processor_config.json").exists()
    exported = subprocess.run(
        [sys.executable, "-m", "kuberl_cli.main", "export", str(out), "-o", str(tmp_path / "x")],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert exported.returncode == 0, exported.stderr[-4000:]
    assert AutoProcessor.from_pretrained(tmp_path / "x").image_processor is not None
