"""`rollout.n` written unquoted: kubectl sends the key "false"; kuberl reads it back as n."""

from kuberl_api.crd import build_crd
from kuberl_api.validation import parse_document, validate_document
from kuberl_api.validation.boolean_keys import boolean_key_paths
from kuberl_api.yamlio import load_yaml
from support.manifests import valid_manifest


def _job(rollout_yaml: str) -> dict:
    manifest = valid_manifest()
    roles = manifest["spec"]["backend_config"]["actor_rollout_ref"]
    roles["rollout"] = {
        **{k: v for k, v in roles["rollout"].items() if k != "n"},
        **load_yaml(rollout_yaml),
    }
    return manifest


def test_the_boolean_keys_are_verls_n() -> None:
    assert set(boolean_key_paths()) == {
        ("actor_rollout_ref", "rollout", "n"),
        ("actor_rollout_ref", "rollout", "val_kwargs", "n"),
    }


def test_unquoted_n_is_read_as_n_with_a_warning() -> None:
    manifest = _job("{n: 4, val_kwargs: {n: 2, do_sample: true, temperature: 0.7}}")
    rollout = manifest["spec"]["backend_config"]["actor_rollout_ref"]["rollout"]
    assert rollout["false"] == 4 and "n" not in rollout
    result = validate_document(parse_document(manifest))
    assert result.ok, [p.render() for p in result.errors]
    assert result.backend_config is not None
    assert result.backend_config.actor_rollout_ref.rollout.n == 4
    assert result.backend_config.actor_rollout_ref.rollout.val_kwargs.n == 2
    warned = {p.path for p in result.warnings if "kubectl" in p.message}
    assert warned == {
        "spec.backend_config.actor_rollout_ref.rollout.false",
        "spec.backend_config.actor_rollout_ref.rollout.val_kwargs.false",
    }


def test_quoted_n_gives_no_warning() -> None:
    result = validate_document(parse_document(_job("{'n': 4}")))
    assert result.ok
    assert not [p for p in result.warnings if "kubectl" in p.message]


def test_both_spellings_are_one_error() -> None:
    result = validate_document(parse_document(_job("{'n': 4, n: 2}")))
    errors = [p for p in result.errors if p.path.endswith("rollout.false")]
    assert len(errors) == 1
    assert "both n and 'false'" in errors[0].message and "keep one" in errors[0].hint


def test_crd_declares_the_alias_and_refuses_both() -> None:
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rollout = schema["properties"]["spec"]["properties"]["backend_config"]["properties"][
        "actor_rollout_ref"
    ]["properties"]["rollout"]
    for node in (rollout, rollout["properties"]["val_kwargs"]):
        alias = node["properties"]["false"]
        assert alias["type"] == node["properties"]["n"]["type"] == "integer"
        rules = [v["rule"] for v in node["x-kubernetes-validations"]]
        assert "!(has(self.n) && has(self.__false__))" in rules


def test_kuberl_validate_reads_a_file_as_kubectl_and_warns(tmp_path, capsys) -> None:
    import yaml

    from kuberl_cli.main import main

    manifest = valid_manifest()
    text = yaml.safe_dump(manifest).replace("'n':", "n:").replace('"n":', "n:")
    assert "\n      n: " in text or " n: " in text
    path = tmp_path / "job.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    assert "rollout.false: read as n" in err and "warning" in err


def test_env_interpolation_is_refused_unless_the_runtime_allows_it(monkeypatch) -> None:
    monkeypatch.setenv("KUBERL_TEST_EPOCHS", "3")
    manifest = valid_manifest()
    manifest["spec"]["backend_config"]["trainer"] = {
        **manifest["spec"]["backend_config"].get("trainer", {}),
        "total_epochs": "${oc.decode:${oc.env:KUBERL_TEST_EPOCHS}}",
    }
    refused = validate_document(parse_document(manifest))  # kuberl validate, the operator
    (error,) = [p for p in refused.errors if p.path.endswith("trainer.total_epochs")]
    assert "operator's own environment" in error.message
    allowed = validate_document(parse_document(manifest), allow_env=True)  # the runtime
    assert allowed.ok and allowed.backend_config.trainer.total_epochs == 3
