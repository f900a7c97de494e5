"""A model at a remote URL cannot be read at validation: the driver reads its config.json (only
that file) before any rank starts, and refuses what the ranks would (kuberl_api/plan/
model_rules.py), with the key, on the real S3 server."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from kuberl_api.plan.from_document import plan_document
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_api.validation.documents import set_dotted
from kuberl_api.validation.problems import SpecInvalid
from kuberl_runtime.config import RunConfig, check_runtime
from support.s3 import s3fs_for

ROOT = Path(__file__).resolve().parents[3]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
VL_MODEL = {"model_type": "qwen2_5_vl", "vision_config": {"depth": 1}}
GAE_CRITIC = {
    "algorithm.adv_estimator": "gae",
    "critic.enable": True,
    "critic.ppo_micro_batch_size_per_gpu": 4,
}


def _run(model_url: str) -> RunConfig:
    tree = copy.deepcopy(DEMO)
    for key, value in {"actor_rollout_ref.model.path": model_url, **GAE_CRITIC}.items():
        set_dotted(tree, key, value)
    doc = Document(DocumentKind.BACKEND_CONFIG, tree, "", "demo.yaml", {})
    assert [p.render() for p in validate_document(doc).errors] == []  # not read here
    return RunConfig(plan_document(doc).plan)


def test_the_driver_refuses_a_critic_on_a_remote_vl_model(s3_server, s3_bucket, monkeypatch):
    for key, value in {**s3_server.env(), "KUBERL_STORAGE_SECRET": "training-s3"}.items():
        monkeypatch.setenv(key, value)
    fs = s3fs_for(s3_server)
    fs.pipe(f"{s3_bucket}/models/vl/config.json", json.dumps(VL_MODEL).encode())
    fs.pipe(f"{s3_bucket}/models/text/config.json", json.dumps({"model_type": "qwen2"}).encode())

    with pytest.raises(SpecInvalid) as refusal:
        check_runtime(_run(f"s3://{s3_bucket}/models/vl"))
    [problem] = refusal.value.problems
    assert problem.path == "critic.enable"
    assert f"s3://{s3_bucket}/models/vl/config.json" in problem.message
    assert "grpo" in problem.hint
    check_runtime(_run(f"s3://{s3_bucket}/models/text"))  # a text model's critic starts
    # What the driver cannot read (no config.json there, a denied credential) it leaves to the
    # ranks, whose initializer names the URL or the Secret (test_s3_inputs_train.py).
    check_runtime(_run(f"s3://{s3_bucket}/models/missing"))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
    check_runtime(_run(f"s3://{s3_bucket}/models/vl"))
