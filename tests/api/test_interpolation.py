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
    assert "not supported" in by_path["spec.backend_config.d"].message
