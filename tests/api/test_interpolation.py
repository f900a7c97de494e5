"""``${...}`` references resolve the way verl's OmegaConf YAML files do."""

from kuberl_api.validation.interpolation import resolve_interpolations


def test_absolute_reference_keeps_the_type():
    tree = {
        "data": {"max_response_length": 256},
        "rollout": {"response_length": "${data.max_response_length}"},
    }
    resolved, problems = resolve_interpolations(tree, "")
    assert problems == []
    assert resolved["rollout"]["response_length"] == 256


def test_relative_reference_and_parent_reference():
    tree = {
        "actor": {
            "checkpoint": {"save_contents": ["model"], "load_contents": "${.save_contents}"},
            "epochs": 2,
            "critic_epochs": "${..actor.epochs}",
        }
    }
    resolved, problems = resolve_interpolations(tree, "")
    assert problems == []
    assert resolved["actor"]["checkpoint"]["load_contents"] == ["model"]
    assert resolved["actor"]["critic_epochs"] == 2


def test_embedded_reference_becomes_text_and_chains_resolve():
    tree = {
        "trainer": {
            "project_name": "p",
            "experiment_name": "${.project_name}-e",
            "default_local_dir": "ckpt/${trainer.experiment_name}",
        }
    }
    resolved, _ = resolve_interpolations(tree, "")
    assert resolved["trainer"]["default_local_dir"] == "ckpt/p-e"


def test_missing_target_cycle_and_resolver_are_problems_with_paths():
    tree = {"a": "${b}", "b": "${a}", "c": "${nothing.here}", "d": "${oc.env:HOME}"}
    _, problems = resolve_interpolations(tree, "spec.backend_config")
    by_path = {p.path: p for p in problems}
    assert "loops back" in by_path["spec.backend_config.a"].message
    assert "set nothing" in by_path["spec.backend_config.c"].hint
    assert "oc.env" in by_path["spec.backend_config.d"].message


def test_omegaconf_resolvers_and_nesting_as_verl():
    tree = {
        "data": {"max_prompt_length": 64},
        "rollout": {
            "prompt_length": "${oc.select:data.max_prompt_length,512}",
            "response_length": "${oc.select:data.max_response_length,512}",
            "nested": "${oc.select:rollout.none,${oc.select:data.max_prompt_length,1}}",
            "decoded": "${oc.decode:'[1, 2]'}",
            "listed": ["${data.max_prompt_length}", {"up": "${....data.max_prompt_length}"}],
            "text": "len-${data.max_prompt_length}",
        },
    }
    resolved, problems = resolve_interpolations(tree, "")
    assert problems == []
    rollout = resolved["rollout"]
    assert (rollout["prompt_length"], rollout["response_length"], rollout["nested"]) == (
        64,
        512,
        64,
    )
    assert rollout["decoded"] == [1, 2]
    assert rollout["listed"] == [64, {"up": 64}]
    assert rollout["text"] == "len-64"


def test_every_bad_interpolation_is_reported_at_once():
    tree = {
        "a": {"x": 1, "bad": "${a.", "who": "${nope:1}", "env": "${oc.env:HOME}", "ok": "${a.x}"}
    }
    resolved, problems = resolve_interpolations(tree, "spec.backend_config")
    by_path = {p.path: p for p in problems}
    assert set(by_path) == {f"spec.backend_config.a.{k}" for k in ("bad", "who", "env")}
    assert "malformed" in by_path["spec.backend_config.a.bad"].message
    assert "resolver" in by_path["spec.backend_config.a.who"].message
    assert by_path["spec.backend_config.a.env"].value == "${oc.env:HOME}"
    assert resolved["a"]["ok"] == 1


def test_the_runtime_may_read_the_environment(monkeypatch):
    monkeypatch.setenv("KUBERL_TEST_LR", "0.5")
    tree = {"lr": "${oc.env:KUBERL_TEST_LR}", "n": "${oc.decode:${oc.env:KUBERL_TEST_LR}}"}
    resolved, problems = resolve_interpolations(tree, "", allow_env=True)
    assert problems == []
    assert resolved == {"lr": "0.5", "n": 0.5}
