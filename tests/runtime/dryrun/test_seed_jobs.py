"""`kuberl plan` on the seed-shaped jobs: they fit with headroom; oversized ones are refused with
the fix spelled out. Every figure comes from the dry run of the runtime's own code, run at 3, 4
and 5 decoder layers and extrapolated exactly to the model's depth (dryrun/depth.py; equal to
executing every layer: test_depth.py), hence the `runtime` marker.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch.distributed as dist

from kuberl_cli.main import main
from kuberl_runtime.dryrun.shapes import ACCELERATORS, MODEL_SHAPES
from kuberl_runtime.dryrun.verdict import HEADROOM, OVERHEAD_GIB

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.skipif(dist.is_initialized(), reason="needs a process without a group"),
]
REPO = Path(__file__).resolve().parents[3]
GRPO_7B = REPO / "examples" / "grpo-gsm8k.yaml"
MODELARTS_32B = Path(__file__).with_name("modelarts-32b.yaml")
PHASES = ("init", "update_actor", "old_log_prob", "ref_log_prob", "weight_sync")


def plan(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["plan", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def peaks(text: str) -> dict[str, float]:
    """Peak GiB per rank of each phase, as the report prints them."""
    rows = re.findall(r"^(\w+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+$", text, flags=re.M)
    return {name: float(peak) for name, peak in rows}


def assert_fits_with_headroom(text: str, accelerator: str) -> None:
    capacity = ACCELERATORS[accelerator]
    phase_peaks = peaks(text)
    assert set(phase_peaks) == set(PHASES), text
    # every phase, plus contexts and vLLM asleep, stays inside 90% of the device
    assert max(phase_peaks.values()) + OVERHEAD_GIB <= HEADROOM * capacity, text
    match = re.search(r"fits: training peak ([\d.]+) GiB and rollout ([\d.]+) GiB", text)
    assert match, text
    assert float(match[1]) == pytest.approx(max(phase_peaks.values()) + OVERHEAD_GIB, abs=0.06)
    assert float(match[2]) < capacity, text


def test_grpo_gsm8k_example_fits_on_h100(capsys):
    """Qwen2.5-7B, two 8-GPU nodes, micro-batches 16 (update) and 32 (log-prob) × 1536 tokens."""
    rc, out, err = plan(capsys, str(GRPO_7B), "--model-config", "Qwen2.5-7B")
    assert rc == 0, out + err
    assert "7.62B parameters, world 16, H100" in out
    assert "figures: measured at 3/4/5 layers, extrapolated to 28; 5-layer check exact" in out
    assert_fits_with_headroom(out, "H100")


def test_modelarts_32b_job_fits_on_910b(capsys):
    """The ModelArts seed's 32B shape on 32 Ascend 910B (64 GB): the npu job plans for 910B."""
    rc, out, err = plan(capsys, str(MODELARTS_32B), "--model-config", "Qwen2.5-32B")
    assert rc == 0, out + err
    assert "32.76B parameters, world 32, 910B" in out
    assert "figures: measured at 3/4/5 layers, extrapolated to 64; 5-layer check exact" in out
    assert_fits_with_headroom(out, "910B")


def test_the_seed_vl_table_plans_with_sp(capsys, tmp_path):
    """The seed's VL table (ulysses_sequence_parallel_size 2) on the language model's dimensions,
    4 of its 64 layers (the full 32B plan is in bench/results/plan.txt): dp 16 x sp 2, each rank
    runs half of every micro-batch's tokens, and it fits on 910B."""
    table = tmp_path / "modelarts-vl-sp2.yaml"
    table.write_text(
        MODELARTS_32B.read_text()
        + "backend_config.data.image_key: images\n"
        + "backend_config.actor_rollout_ref.actor.ulysses_sequence_parallel_size: 2\n"
        + "backend_config.actor_rollout_ref.actor.freeze_vision_tower: true\n"
    )
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**MODEL_SHAPES["Qwen2.5-32B"], "num_hidden_layers": 4}))
    rc, out, err = plan(capsys, str(table), "--model-config", str(config))
    assert rc == 0, out + err
    assert "world 32, 910B" in out
    assert "ulysses_sequence_parallel_size=2): dp 16 x sp 2" in out
    # micro-batches of 2 (update) and 4 (log-prob) rows of 1024 + 2048 tokens, halved
    assert "update_actor 3072, old_log_prob 6144, ref_log_prob 6144" in out
    assert_fits_with_headroom(out, "910B")


def test_the_seed_vl_table_plans_a_vl_model_with_sp(capsys, tmp_path):
    """The same table on a Qwen2.5-VL model (tiny, its vision encoder trained): the dry run runs
    the runtime's SP path for it (whole sequences embedded, the language model on its slice)."""
    from kuberl_runtime.testing.tiny_vl import build_tiny_vl_config, build_tiny_vl_processor

    table = tmp_path / "modelarts-vl-sp2.yaml"
    table.write_text(
        MODELARTS_32B.read_text()
        + "backend_config.data.image_key: images\n"
        + "backend_config.actor_rollout_ref.actor.ulysses_sequence_parallel_size: 2\n"
    )
    tokenizer = build_tiny_vl_processor().tokenizer
    config = tmp_path / "config.json"
    config.write_text(build_tiny_vl_config(tokenizer, hidden=128, vision_depth=2).to_json_string())
    rc, out, err = plan(capsys, str(table), "--model-config", str(config))
    assert rc == 0, out + err
    assert "ulysses_sequence_parallel_size=2): dp 16 x sp 2" in out
    assert "update_actor 3072, old_log_prob 6144, ref_log_prob 6144" in out
    assert "of those parameters (trained)" in out
    assert "fits: training peak" in out


def test_huge_micro_batch_is_refused_with_the_value_that_fits(capsys):
    """80 full-length rows per update micro-batch (the rank's whole mini-batch) on H100."""
    key = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
    rc, out, err = plan(capsys, str(GRPO_7B), "--model-config", "Qwen2.5-7B", "--set", f"{key}=80")
    assert rc == 1, out + err
    assert "does not fit" in out and "phase update_actor peaks at" in out
    fitting = int(re.search(rf"lower {re.escape(key)} from 80 to (\d+)", out)[1])
    assert 16 <= fitting < 80  # 16 fits (the example as written)
    assert "use_dynamic_bsz with a token budget of about" in out


def test_7b_on_one_device_is_refused_with_the_devices_it_needs(capsys, tmp_path):
    """Sharded state alone (fp32 weights, AdamW, fp32 reference: 16 B per parameter) is 114 GiB."""
    one = tmp_path / "one-device.yaml"
    one.write_text(
        MODELARTS_32B.read_text()
        .replace("trainer.nnodes: 4", "trainer.nnodes: 1")
        .replace("trainer.n_gpus_per_node: 8", "trainer.n_gpus_per_node: 1")
        .replace("tensor_model_parallel_size: 4", "tensor_model_parallel_size: 1")
    )
    rc, out, err = plan(capsys, str(one), "--model-config", "Qwen2.5-7B", "--accelerator", "H100")
    assert rc == 1, out + err
    assert "world 1, H100" in out
    params = float(re.search(r"model ([\d.]+)B parameters", out)[1]) * 1e9
    state = float(re.search(r"optimizer and reference alone take ([\d.]+) GiB per device", out)[1])
    assert state == pytest.approx(16 * params / 2**30, rel=0.01)
    needed = int(re.search(r"use at least (\d+) devices \(world 1 now\)", out)[1])
    peak, budget = (
        float(x)
        for x in re.search(
            r"update_actor peaks at ([\d.]+) GiB per device, over ([\d.]+)", out
        ).groups()
    )
    # The state divides by the world, the micro-batch's own memory does not: the advice is the
    # smallest world whose shard of the state fits in the room the micro-batch leaves.
    room = budget - (peak - state)
    assert room > 0, out
    assert abs(needed - math.ceil(state / room)) <= 1, out
    assert needed >= 2, out
    assert "the trainer's state leaves vLLM no room: use at least" in out


def test_invalid_job_is_reported_not_raised(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        MODELARTS_32B.read_text().replace(
            "micro_batch_size_per_gpu: 2", "micro_batch_size_per_gpu: 3"
        )
    )
    rc, _, err = plan(capsys, str(bad), "--model-config", "Qwen2.5-32B")
    assert rc == 2
    assert "ppo_micro_batch_size_per_gpu" in err and "error:" in err
