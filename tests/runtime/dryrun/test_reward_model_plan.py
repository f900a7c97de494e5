"""`kuberl plan` counts the reward model (dryrun/reward_model.py): a discriminative RM's FSDP2
shard is resident on every rank beside the trainer; a generative RM's vLLM judge takes
reward_model.rollout.gpu_memory_utilization of the device while judging and, on GPU with
free_cache_engine, sleeps otherwise."""

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as dist
import yaml
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from kuberl_api.accelerators import MEMORY_GIB
from kuberl_api.plan import build_run_plan
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_api.validation.documents import set_dotted
from kuberl_cli.main import main
from kuberl_runtime.dryrun.reward_model import GiB, format_share, problems, share_of
from kuberl_runtime.dryrun.shapes import MODEL_SHAPES
from kuberl_runtime.dryrun.verdict import FitVerdict
from kuberl_runtime.testing.tiny import save_tiny_model

ROOT = Path(__file__).resolve().parents[3]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
TOKENIZER = ROOT / "examples/tokenizer/arith-tokenizer"


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("rm")
    return save_tiny_model(tmp / "rm", AutoTokenizer.from_pretrained(TOKENIZER), seed=0)


def _plan(**dotted: Any) -> Any:
    tree = copy.deepcopy(DEMO)
    for key, value in dotted.items():
        set_dotted(tree, key, value)
    result = validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))
    assert result.ok, [p.render() for p in result.errors]
    return build_run_plan(result.backend_config)


def _rm(path: Path, gpus: int, device: str = "cuda") -> dict[str, Any]:
    return {
        "trainer.n_gpus_per_node": gpus,
        "trainer.device": device,
        "reward.reward_model.enable": True,
        "reward.reward_model.model_path": str(path),
    }


def test_a_discriminative_rm_is_a_shard_per_rank(rm_dir):
    params = AutoModelForSequenceClassification.from_pretrained(rm_dir, num_labels=1)
    numel = sum(p.numel() for p in params.parameters())
    one, two = (share_of(_plan(**_rm(rm_dir, gpus)), 80.0) for gpus in (1, 2))
    assert one.kind == "discriminative" and one.parameters == two.parameters == numel
    assert one.resident_bytes == numel * 4  # fp32 (the RM's fsdp_config.model_dtype default)
    assert two.resident_bytes == -(-numel // 2) * 4
    assert one.judging_bytes == 0 and "FSDP2 shard of 2 ranks" in format_share(two)


def test_a_generative_rm_takes_its_share_while_judging(rm_dir):
    judge = {
        **_rm(rm_dir, 1),
        "reward.reward_model.rollout.name": "vllm",
        "reward.reward_model.rollout.tensor_model_parallel_size": 1,
        "reward.reward_model.rollout.gpu_memory_utilization": 0.25,
        "reward.custom_reward_function.path": "/rewards/judge.py",
    }
    on_gpu = share_of(_plan(**judge), 80.0)
    assert on_gpu.kind == "generative" and on_gpu.judging_bytes == 20 * GiB
    assert on_gpu.resident_bytes == 0 and "sleeps" in format_share(on_gpu)
    on_cpu = share_of(_plan(**{**judge, "trainer.device": "cpu"}), 80.0)
    assert on_cpu.resident_bytes == 20 * GiB and "stays resident" in format_share(on_cpu)
    fits = FitVerdict(True, 80.0, 60.0, 70.0, [])
    assert problems(on_gpu, fits, static_gib=10.0) == []
    (too_big,) = problems(on_gpu, fits, static_gib=60.0)
    assert "reward_model.rollout.gpu_memory_utilization" in too_big
    assert len(problems(on_cpu, fits, static_gib=10.0)) == 2  # resident beside train and rollout


def test_no_reward_model_no_line():
    assert share_of(_plan(), 80.0) is None


@pytest.mark.skipif(dist.is_initialized(), reason="needs a process without a group")
def test_kuberl_plan_prints_the_judge_and_refuses_one_that_leaves_no_room(rm_dir, capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**MODEL_SHAPES["Qwen2.5-0.5B"], "num_hidden_layers": 5}))
    judge = {
        "reward.reward_model.enable": "true",
        "reward.reward_model.model_path": str(rm_dir),
        "reward.reward_model.rollout.name": "vllm",
        "reward.reward_model.rollout.tensor_model_parallel_size": "1",
        "reward.reward_model.rollout.gpu_memory_utilization": "0.97",
        "reward.custom_reward_function.path": "/rewards/judge.py",
        "trainer.device": "cuda",
    }
    sets = [f"--set={k}={v}" for k, v in judge.items()]
    rc = main(["plan", str(ROOT / "examples/demo.yaml"), "--model-config", str(config), *sets])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert f"reward model (generative) {rm_dir}: 0.000B parameters" in out
    judging = 0.97 * MEMORY_GIB["H100"]
    assert f"vLLM judge on each rank takes {judging:.2f} GiB while judging, 0.00 GiB" in out
    assert "resident otherwise (sleeps outside reward passes" in out
    assert "does not fit with the reward model: judging" in out
    assert "lower reward_model.rollout.gpu_memory_utilization" in out
