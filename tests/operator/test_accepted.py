"""A valid job's warnings and keys accepted without effect are told on the job: the Validated
condition names them (as `kuberl validate` prints them, capped) and events say them once per spec
generation."""

from pathlib import Path
from typing import Any

import pytest

from kuberl_api.validation import Problem, Severity
from kuberl_api.yamlio import dump_yaml
from kuberl_cli.main import main
from kuberl_operator.accepted import MAX_LISTED, Accepted, validated_message
from kuberl_operator.conditions import MAX_MESSAGE
from support.manifests import delete, valid_manifest, with_changes

BC = "spec.backend_config"
NO_EFFECT = "actor_rollout_ref.actor.use_torch_compile"
# KL both in the reward and in the loss (the manifest sets use_kl_loss): a warning, not an error.
WARNED = {f"{BC}.algorithm.use_kl_in_reward": True}


@pytest.fixture
def manifest() -> dict[str, Any]:
    changes = {"metadata.name": "grpo", f"{BC}.{NO_EFFECT}": False, **WARNED}
    return with_changes(valid_manifest(), changes)


def validate_lines(manifest: dict[str, Any], tmp_path: Path, capsys: Any) -> list[str]:
    """What `kuberl validate` says of `manifest` beyond its ok line: warnings and no-effect keys,
    without the file name."""
    path = tmp_path / "job.yaml"
    path.write_text(dump_yaml(manifest))  # quotes rollout's 'n'
    assert main(["validate", str(path)]) == 0
    captured = capsys.readouterr()
    prefix = f"{path}#0: "
    lines = (captured.err + captured.out).splitlines()
    return [line.removeprefix(prefix) for line in lines if " ok (" not in line]


def told(harness: Any, reason: str) -> list[Any]:
    return [event for event in harness.events if event.reason == reason]


def test_validated_names_the_warnings_and_no_effect_keys_as_validate_prints_them(
    harness, manifest, tmp_path, capsys
):
    printed = validate_lines(manifest, tmp_path, capsys)
    assert any(NO_EFFECT in line for line in printed), printed
    assert any(line.startswith("warning: ") for line in printed), printed

    status = harness.reconcile()
    assert status["phase"] == "Provisioning"
    validated = harness.condition("Validated")
    assert validated["status"] == "True" and validated["reason"] == "Valid"
    message = validated["message"]
    assert message.startswith("spec and backend_config are valid; ")
    for line in printed:
        assert line in message, (line, message)

    [keys] = told(harness, "KeysWithoutEffect")
    assert keys.type == "Normal" and NO_EFFECT in keys.message
    assert keys.message in printed
    [warnings] = told(harness, "ValidationWarnings")
    assert warnings.type == "Warning"
    assert f"{BC}.algorithm.use_kl_in_reward" in warnings.message
    assert warnings.message.startswith("1 warning(s): warning: ")


def test_the_events_are_said_once_per_spec_generation(harness):
    harness.reconcile()
    harness.advance(30)
    harness.reconcile()  # a timer tick: same generation, nothing new to say
    harness.reconcile()
    assert len(told(harness, "KeysWithoutEffect")) == 1
    assert len(told(harness, "ValidationWarnings")) == 1

    harness.set_spec({f"{BC}.trainer.total_epochs": 2})  # a new generation, same findings
    harness.reconcile()
    assert len(told(harness, "KeysWithoutEffect")) == 2
    assert len(told(harness, "ValidationWarnings")) == 2

    harness.set_spec({f"{BC}.{NO_EFFECT}": delete(), f"{BC}.algorithm.use_kl_in_reward": False})
    harness.reconcile()
    assert harness.condition("Validated")["message"] == "spec and backend_config are valid"
    assert len(told(harness, "KeysWithoutEffect")) == 2
    assert len(told(harness, "ValidationWarnings")) == 2


def test_a_clean_job_says_only_that_it_is_valid(harness):
    harness.set_spec({f"{BC}.{NO_EFFECT}": delete(), f"{BC}.algorithm.use_kl_in_reward": delete()})
    harness.reconcile()
    assert harness.condition("Validated")["message"] == "spec and backend_config are valid"
    assert not told(harness, "KeysWithoutEffect") and not told(harness, "ValidationWarnings")


def test_the_message_names_the_first_keys_and_counts_the_rest():
    keys = [f"actor_rollout_ref.actor.key_{i:03d}_{'x' * 60}" for i in range(500)]
    warnings = [
        Problem(f"{BC}.k{i}", "odd", "fix it", "v" * 200, Severity.WARNING) for i in range(50)
    ]
    message = validated_message("backend_config", Accepted(warnings, keys, ["a.b"] * 7))
    assert len(message) <= MAX_MESSAGE
    assert message.startswith("spec and backend_config are valid; warning: ")
    assert keys[0] in message and keys[500 - 1] not in message
    assert f"and {50 - MAX_LISTED} more warning(s)" in message
    assert f"{BC}.k{MAX_LISTED - 1}:" in message and f"{BC}.k{MAX_LISTED}:" not in message


def test_short_lists_are_named_whole():
    keys = [f"a.k{i}" for i in range(MAX_LISTED)]
    message = validated_message("sft_config", Accepted([], keys, []))
    assert message == (
        "spec and sft_config are valid; "
        f"{MAX_LISTED} key(s) set but not honoured (accepted, no effect in kuberl; see "
        "`kuberl keys`): " + ", ".join(keys)
    )
