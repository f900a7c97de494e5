"""Ray token key rotation: a running cluster keeps the token of the key that made its Secret; the
operator derives it from that key (current or previous) and new clusters use the current key."""

import dataclasses
from pathlib import Path
from typing import Any

from kuberl_operator.builders import JobRef
from kuberl_operator.config import OperatorConfig
from kuberl_operator.names import ray_token_secret_name, token_key_id
from kuberl_operator.ray_auth import derive_token, key_id
from tests.operator.conftest import NAMESPACE, Harness

OLD, NEW, OTHER = b"o" * 32, b"n" * 32, b"x" * 32


def _config(tmp_path: Path, key: bytes, previous: tuple[bytes, ...] = ()) -> OperatorConfig:
    name = key_id(key)
    (tmp_path / name).write_bytes(key + b"\n")
    config = OperatorConfig(
        backoff_base=10, backoff_max=60, ray_token_key_file=str(tmp_path / name)
    )
    if previous:
        listed = tmp_path / f"previous-{name}"
        listed.write_bytes(b"\n".join(previous) + b"\n\n")
        config = dataclasses.replace(config, ray_token_previous_keys_file=str(listed))
    return config


def _restart(harness: Harness, config: OperatorConfig) -> None:
    harness.config = config
    harness.reconciler = harness.new_reconciler()
    harness.ray.tokens.clear()


def _ref(harness: Harness) -> JobRef:
    return JobRef(harness.name, NAMESPACE, harness.job["metadata"]["uid"])


def _secret_of(harness: Harness, cluster: str) -> str:
    return harness.kube.rayclusters[cluster]["spec"]["authOptions"]["secretName"]


def test_secret_names_carry_the_key_id() -> None:
    name = ray_token_secret_name("grpo", key_id(OLD))
    assert name == f"grpo-ray-token-{key_id(OLD)}" and token_key_id(name) == key_id(OLD)
    assert token_key_id(ray_token_secret_name("grpo")) is None
    assert token_key_id(ray_token_secret_name("x-ray-token-abc")) is None
    longest = ray_token_secret_name("a" * 253, key_id(OLD))
    assert len(longest) <= 253 and token_key_id(longest) == key_id(OLD)
    assert key_id(OLD) != key_id(NEW) and OLD.hex() not in key_id(OLD)


def test_a_running_job_keeps_its_token_through_a_rotation(
    manifest: dict[str, Any], tmp_path: Path
) -> None:
    running = Harness(manifest, _config(tmp_path, OLD))
    running.run_until_running()
    assert _secret_of(running, "grpo-a1") == ray_token_secret_name("grpo", key_id(OLD))
    _restart(running, _config(tmp_path, NEW, previous=(OLD,)))
    running.reconcile()  # the poll after the operator came back with the new key
    assert running.ray.tokens == {derive_token(OLD, _ref(running))}
    running.ray.finish("grpo-1", "SUCCEEDED", 0)
    assert running.reconcile()["phase"] == "Succeeded"

    fresh = Harness(manifest, _config(tmp_path, NEW, previous=(OLD,)))
    fresh.run_until_running()
    assert _secret_of(fresh, "grpo-a1") == ray_token_secret_name("grpo", key_id(NEW))
    [secret] = [o for o in fresh.kube.objects if o["kind"] == "Secret"]
    assert secret["stringData"]["auth_token"] == derive_token(NEW, _ref(fresh))
    assert fresh.ray.tokens == {derive_token(NEW, _ref(fresh))}


def test_a_dropped_key_fails_the_attempt_by_name_and_the_retry_uses_the_new_key(
    manifest: dict[str, Any], tmp_path: Path
) -> None:
    harness = Harness(manifest, _config(tmp_path, OLD))
    harness.run_until_running()
    _restart(harness, _config(tmp_path, OTHER))  # reinstalled: the old key is gone
    status = harness.reconcile()
    first = status["attempts"][0]
    assert first["result"] == "Failed" and first["reason"] == "TokenKeyUnknown"
    assert key_id(OLD) in first["message"] and "--ray-token-previous-keys-file" in first["message"]
    assert status["phase"] == "Restarting" and harness.ray.tokens == set()
    harness.advance(61)
    harness.reconcile()
    harness.make_cluster_ready()
    status = harness.reconcile()
    assert status["attempts"][1]["rayCluster"] == "grpo-a2"
    assert _secret_of(harness, "grpo-a2") == ray_token_secret_name("grpo", key_id(OTHER))
    assert harness.ray.tokens == {derive_token(OTHER, _ref(harness))}
