"""realnode.jobs: the demo job put on the real node is a valid job that lands there, in pods that
see their inputs and output at the paths the config names (no cluster needed)."""

import copy
import re
from pathlib import Path

import pytest
import yaml
from realnode.jobs import RUNTIME_IMAGE, real_pod_job

from kuberl_api.validation import parse_document, validate_document
from kuberl_operator.builders import JobRef, build_raycluster

REPO = Path(__file__).resolve().parents[2]
INPUTS = "/tmp/kuberl-demo/inputs"


def demo_job() -> dict:
    job = yaml.safe_load((REPO / "examples" / "demo-job.yaml").read_text())
    config = job["spec"]["backend_config"]
    config["actor_rollout_ref"]["model"]["path"] = f"{INPUTS}/models/tiny-qwen2"
    config["data"]["train_files"] = f"{INPUTS}/data/arith/train.parquet"
    return job


def test_demo_job_in_real_pods_is_valid_and_lands_on_the_real_node():
    job, volumes = real_pod_job(demo_job(), api_port=6443, inputs_dir=INPUTS)
    result = validate_document(parse_document(copy.deepcopy(job)))
    assert result.ok, [p.render() for p in result.errors]
    cluster = build_raycluster(JobRef("demo", "kuberl-demo", "uid"), result.spec, 1, "unused")
    groups = [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]
    claims = {v["metadata"]["name"]: v for v in volumes if v["kind"] == "PersistentVolumeClaim"}
    paths = {v["metadata"]["name"]: v["spec"]["hostPath"]["path"] for v in volumes
             if v["kind"] == "PersistentVolume"}  # fmt: skip
    assert paths == {"demo-output": "/tmp/kuberl-demo/outputs", "demo-inputs": INPUTS}
    assert set(claims) == set(paths)
    for group in groups:
        pod = group["template"]["spec"]
        assert pod["hostNetwork"] is True
        assert pod["nodeSelector"] == {"kuberl.io/real-node": "true"}
        [container] = pod["containers"]
        assert container["image"] == RUNTIME_IMAGE and container["imagePullPolicy"] == "Never"
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert mounts[INPUTS]["readOnly"] is True
        assert "/tmp/kuberl-demo/outputs" in mounts
        env = {var["name"]: var.get("value") for var in container["env"]}
        assert (
            env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
            and env["KUBERNETES_SERVICE_PORT"] == "6443"
        )
        volumes_by_name = {v["name"]: v for v in pod["volumes"]}
        claimed = {v["persistentVolumeClaim"]["claimName"] for v in volumes_by_name.values()
                   if "persistentVolumeClaim" in v}  # fmt: skip
        assert claimed == set(claims)


def test_an_input_outside_the_mounted_directory_is_refused():
    job = demo_job()
    job["spec"]["backend_config"]["data"]["train_files"] = "/elsewhere/train.parquet"
    with pytest.raises(ValueError, match=re.escape("data.train_files '/elsewhere/train.parquet'")):
        real_pod_job(job, api_port=6443, inputs_dir=INPUTS)
