"""Each fate as a user meets it in ``kuberl validate``: refused values are errors naming the key,
the value and the fix; verl's default is accepted; no-effect keys are noted, not refused."""

import copy
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from kuberl_api.backend_config import BackendConfig
from kuberl_api.keys import REGISTRY, Fate, schema_leaves
from kuberl_api.keys.check import HYDRA_TARGETS
from kuberl_api.keys.verl_defaults import verl_defaults
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_cli.main import main

ROOT = Path(__file__).resolve().parents[3]
BASE = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
REFUSED = [e for e in REGISTRY.values() if e.fate is Fate.REFUSED]
NO_EFFECT = [e for e in REGISTRY.values() if e.fate is Fate.NO_EFFECT]
NO_EFFECT_WITH_DEFAULT = [
    e for e in NO_EFFECT if verl_defaults().values.get(e.key) is not None and not e.as_default
]


def _annotation(key: str) -> Any:
    model: type[BaseModel] = BackendConfig
    *parents, leaf = key.split(".")
    for part in parents:
        model = _model_in(model.model_fields[part].annotation)
    return model.model_fields[leaf].annotation


def _model_in(annotation: Any) -> type[BaseModel]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(a for a in typing.get_args(annotation) if isinstance(a, type))


def _other_value(key: str) -> Any:
    """A value of the key's type that is neither verl's default nor null."""
    default = schema_leaves()[key]
    allowed = REGISTRY[key].allowed if not REGISTRY[key].has_schema_default else (default,)
    annotation = _annotation(key)
    options = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    if typing.get_origin(annotation) is typing.Literal:
        options = [annotation]
    for option in options:
        if typing.get_origin(option) is typing.Literal:
            return next(v for v in typing.get_args(option) if v not in allowed)
        if option is bool:
            return not default
        if option is int:
            return 2 if 2 not in allowed else 3
        if option is float:
            return 0.5 if default != 0.5 else 0.25
        if option is str:
            return "/somewhere/custom"
        if typing.get_origin(option) is list:
            inner = typing.get_args(option)[0]
            first = typing.get_args(inner)[0] if typing.get_origin(inner) else "x"
            return [first]
        if typing.get_origin(option) is dict or option is dict:
            return {"custom": 1}
        if isinstance(option, types.UnionType):
            continue
    raise AssertionError(f"{key}: no test value for {annotation}")


def _with(key: str, value: Any) -> dict:
    tree = copy.deepcopy(BASE)
    *parents, leaf = key.split(".")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return tree


def _validate(tree: dict):
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "test.yaml", {}))


@pytest.mark.parametrize("entry", REFUSED, ids=lambda e: e.key)
def test_a_refused_key_set_to_another_value_is_an_error_naming_key_value_and_fix(entry):
    value = _other_value(entry.key)
    result = _validate(_with(entry.key, value))
    mine = [p for p in result.errors if p.path == entry.key and entry.fix in p.render()]
    assert mine, [p.render() for p in result.problems]
    assert "not supported by kuberl" in mine[0].render()
    assert repr(value)[:40] in mine[0].render()
    assert result.backend_config is None


@pytest.mark.parametrize("entry", REFUSED, ids=lambda e: e.key)
def test_a_refused_key_at_verl_default_is_accepted(entry):
    default = schema_leaves()[entry.key] if entry.has_schema_default else entry.allowed[0]
    result = _validate(_with(entry.key, default))
    assert not [p for p in result.errors if p.path == entry.key], [
        p.render() for p in result.errors
    ]


def test_ulysses_sequence_parallel_size_of_the_critic_follows_the_actor():
    key = "critic.ulysses_sequence_parallel_size"
    result = _validate(_with(key, 2))
    rendered = [p.render() for p in result.errors if p.path == key and "kuberl" in p.message]
    assert rendered == [
        f"{key}: not supported by kuberl (got 2) — the critic runs in the actor's (dp, sp) "
        "layout: leave it at 1 or set it to actor_rollout_ref.actor.ulysses_sequence_parallel_size"
    ]


@pytest.mark.parametrize(
    ("key", "value", "fix"),
    [
        ("reward_model.reward_manager", "limited", "naive, batch, dapo, prime and gdpo"),
        ("trainer.logger", ["console", "clearml"], "remove the others"),
    ],
)
def test_an_honoured_key_refuses_values_kuberl_does_not_implement(key, value, fix):
    result = _validate(_with(key, value))
    assert any(p.path == key and fix in p.render() for p in result.errors), [
        p.render() for p in result.problems
    ]


@pytest.mark.parametrize("entry", NO_EFFECT_WITH_DEFAULT[:8], ids=lambda e: e.key)
def test_a_no_effect_key_changed_from_verls_default_is_accepted_and_listed(entry):
    result = _validate(_with(entry.key, _other_value(entry.key)))
    assert not [p for p in result.errors if p.path == entry.key]
    assert entry.key in result.not_honoured
    assert entry.key not in result.at_verl_default


@pytest.mark.parametrize("entry", NO_EFFECT_WITH_DEFAULT[:8], ids=lambda e: e.key)
def test_a_no_effect_key_at_verls_default_is_counted_not_listed(entry):
    result = _validate(_with(entry.key, verl_defaults().values[entry.key]))
    assert not [p for p in result.errors if p.path == entry.key]
    assert entry.key not in result.not_honoured
    assert entry.key in result.at_verl_default


@pytest.mark.parametrize(
    ("key", "value", "listed"),
    [
        # A subtree that leaves some of verl's keys out, the rest as verl writes them.
        ("actor_rollout_ref.actor.profiler", {"enable": False, "all_ranks": False}, False),
        ("actor_rollout_ref.actor.profiler", {"enable": False, "save_path": "/tmp/p"}, True),
        # An interpolation as verl writes it is verl's default; another one is a change.
        ("actor_rollout_ref.ref.strategy", "${actor_rollout_ref.actor.strategy}", False),
        ("actor_rollout_ref.actor.rollout_n", 3, True),
    ],
)
def test_subtrees_and_interpolations_compare_as_written(key, value, listed):
    result = _validate(_with(key, value))
    assert result.ok, [p.render() for p in result.errors]
    assert (key in result.not_honoured) is listed
    assert (key in result.at_verl_default) is not listed


@pytest.mark.parametrize(
    ("target", "listed"), [("verl.workers.config.FSDPActorConfig", False), ("my.Actor", True)]
)
def test_hydra_class_names_are_listed_only_when_they_are_not_verls(target, listed):
    tree = _with("actor_rollout_ref.actor._target_", target)
    result = _validate(tree)
    assert result.ok, [p.render() for p in result.errors]
    assert (HYDRA_TARGETS in result.not_honoured) is listed
    assert (HYDRA_TARGETS in result.at_verl_default) is not listed


@pytest.mark.parametrize("value", ["fsdp", "fsdp2"])
def test_a_strategy_kuberl_runs_anyway_is_counted_not_listed(value):
    result = _validate(_with("critic.strategy", value))
    assert "critic.strategy" not in result.not_honoured
    assert "critic.strategy" in result.at_verl_default


def test_validate_ends_with_a_summary_of_keys_set_but_not_honoured(tmp_path, capsys):
    tree = _with("actor_rollout_ref.actor.use_torch_compile", False)
    tree["data"]["dataloader_num_workers"] = 8  # verl's default: counted, not named
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(tree))
    assert main(["validate", str(path)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    # demo.yaml's own actor.strategy fsdp2 is counted too: kuberl runs FSDP2 anyway.
    assert last.endswith(
        ": 1 key(s) set but not honoured (accepted, no effect in kuberl; see `kuberl keys`): "
        "actor_rollout_ref.actor.use_torch_compile; "
        "2 more set to verl's default (nothing lost), not listed"
    ), last


def test_keys_command_prints_the_registry_as_json(capsys):
    assert main(["keys", "--json", "actor_rollout_ref.actor.ulysses"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {
            "key": "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
            "default": 1,
            "fate": "honoured",
            "where": "api/kuberl_api/plan/build.py",
            "detail": "read by api/kuberl_api/plan/build.py",
        }
    ]


def test_keys_command_prints_every_key_as_json(capsys):
    """Required keys (model.path) have no default: listed as null, not a crash."""
    assert main(["keys", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(REGISTRY)
    path = next(r for r in rows if r["key"] == "actor_rollout_ref.model.path")
    assert path["default"] is None and path["fate"] == "honoured"


def test_keys_command_with_an_unknown_prefix_fails(capsys):
    assert main(["keys", "no_such_section"]) == 1


@pytest.mark.parametrize(
    "example", ["demo.yaml", "grpo-gsm8k.yaml", "ppo-gsm8k.yaml", "modelarts-verl.yaml"]
)
def test_an_effective_config_written_out_validates_again(example):
    """The operator submits the effective config (every default filled in); the runtime
    validates it again, so no filled-in value may be refused."""
    from kuberl_api.validation import load_documents

    first = validate_document(load_documents(ROOT / "examples" / example)[0])
    tree = first.backend_config.model_dump(mode="json")
    again = _validate(tree)
    refused = [p.render() for p in again.errors if "kuberl" in p.message]
    assert refused == []
