"""The ModelArts VeRL table as the seed writes it for Qwen2.5-VL-32B on geometry3k (image_key,
disable_mm_preprocessor_cache, ulysses_sequence_parallel_size, freeze_vision_tower) validates with
nothing left unhonoured, and its run plan carries the image settings and the SP layout."""

from __future__ import annotations

from pathlib import Path

from kuberl_cli.main import main
from kuberl_runtime.config import load_run_config

SEED_32B = Path(__file__).resolve().parents[1] / "dryrun" / "modelarts-32b.yaml"
VL_LINES = """
engine_kwargs.vllm.disable_mm_preprocessor_cache: true
backend_config.data.image_key: images
backend_config.actor_rollout_ref.actor.ulysses_sequence_parallel_size: 2
backend_config.actor_rollout_ref.actor.freeze_vision_tower: true
"""


def _seed(tmp_path: Path) -> Path:
    text = SEED_32B.read_text().replace("models/Qwen2.5-32B", "models/Qwen2.5-VL-32B-Instruct")
    path = tmp_path / "modelarts-vl.yaml"
    path.write_text(text + VL_LINES)
    return path


def test_the_seed_vl_table_validates_with_nothing_unhonoured(tmp_path, capsys):
    assert main(["validate", str(_seed(tmp_path))]) == 0
    out = capsys.readouterr()
    assert ": ok (modelarts)" in out.out, out
    assert "not honoured" not in out.out + out.err


def test_its_plan_carries_images_and_sp(tmp_path):
    run = load_run_config(_seed(tmp_path))
    plan = run.plan
    assert plan.data.image_key == "images"
    assert plan.data.return_multi_modal_inputs is True
    assert plan.actor.freeze_vision_tower is True
    assert (plan.placement.dp_size, plan.placement.sp_size) == (16, 2)
    assert plan.rollout.engine_kwargs.vllm == {"disable_mm_preprocessor_cache": True}
