"""verl 0.9.1's own configs read as written (issue 13, part A).

The oracle is the ``verl==0.9.1`` wheel in the dev environment (installed --no-deps, its
config YAMLs are data): its complete generated default config, the values its docs show, the
ModelArts table as users write it, and every deprecated key in both spellings.
"""

import copy
from pathlib import Path
from typing import Any

import pytest
import verl

from kuberl_api.plan import build_run_plan
from kuberl_api.validation import parse_document, validate_document
from kuberl_api.validation.deprecations import DEPRECATED_KEYS
from kuberl_api.validation.documents import set_dotted
from kuberl_api.validation.rules_switches import SWITCHES
from kuberl_api.yamlio import dump_yaml, load_yaml

VERL_CONFIG = Path(verl.__file__).parent / "trainer" / "config"
GENERATED = load_yaml((VERL_CONFIG / "_generated_ppo_trainer.yaml").read_text())
AR = "actor_rollout_ref."


def _verl_default(**changes: Any) -> dict:
    """verl's generated config with only what a user must fill, plus ``changes``."""
    tree = copy.deepcopy(GENERATED)
    required = {
        "data.train_files": "/data/train.parquet",
        AR + "model.path": "/models/tiny",
        AR + "actor.ppo_micro_batch_size_per_gpu": 2,
        AR + "ref.log_prob_micro_batch_size_per_gpu": 2,
        AR + "rollout.log_prob_micro_batch_size_per_gpu": 2,
        "critic.ppo_micro_batch_size_per_gpu": 2,
    }
    for key, value in {**required, **changes}.items():
        set_dotted(tree, key, value)
    return tree


def _validate(tree: dict) -> Any:
    return validate_document(parse_document(tree))


def test_generated_default_config_validates_with_zero_errors() -> None:
    result = _validate(_verl_default())
    assert result.errors == []
    assert [p for p in result.warnings] == []
    cfg = result.backend_config
    assert cfg is not None
    # Interpolations resolved by OmegaConf as verl does (oc.select with defaults, relative keys).
    assert cfg.actor_rollout_ref.rollout.prompt_length == GENERATED["data"]["max_prompt_length"]
    assert cfg.critic.ppo_mini_batch_size == GENERATED[AR[:-1]]["actor"]["ppo_mini_batch_size"]
    assert cfg.critic.forward_micro_batch_size_per_gpu == 2
    # Every key verl's config sets is at verl's default: counted, none listed as not honoured.
    assert result.not_honoured == []
    assert "_target_ (Hydra class names)" in result.at_verl_default
    assert len(result.at_verl_default) > 100


def test_validate_on_verls_default_config_is_one_quiet_summary_line(tmp_path, capsys) -> None:
    from kuberl_cli.main import main

    path = tmp_path / "verl.yaml"
    path.write_text(dump_yaml(_verl_default()))  # "n" quoted, as verl's own file has it
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2, out  # the ok line and the summary
    assert out[1].startswith(f"{path}#0: 0 key(s) set but not honoured")
    assert out[1].endswith("more set to verl's default (nothing lost), not listed")


def test_generated_default_values_reach_the_models() -> None:
    cfg = _validate(_verl_default()).backend_config
    verl_actor = GENERATED["actor_rollout_ref"]["actor"]
    assert cfg.actor_rollout_ref.actor.optim.lr == verl_actor["optim"]["lr"]
    assert cfg.actor_rollout_ref.actor.tau_neg == verl_actor["tau_neg"]
    assert cfg.actor_rollout_ref.rollout.logprobs_mode == "processed_logprobs"
    assert cfg.distillation["enabled"] is False


def test_documented_ppo_trainer_values_validate() -> None:
    # verl's docs (ppo_trainer.yaml as documented) write both offload switches as False.
    changes = {
        AR + "actor.fsdp_config.param_offload": False,
        AR + "actor.fsdp_config.grad_offload": False,
        AR + "actor.fsdp_config.optimizer_offload": False,
        AR + "ref.fsdp_config.param_offload": False,
        "critic.model.fsdp_config.param_offload": False,
        "critic.model.fsdp_config.grad_offload": False,
        "critic.model.fsdp_config.optimizer_offload": False,
    }
    result = _validate(_verl_default(**changes))
    assert result.errors == []


MODELARTS = """\
af_output_dir: /home/ma-user/work/outputs/run
backend_config.data.train_files: /home/ma-user/work/data/train.parquet
backend_config.data.train_batch_size: 64
backend_config.actor_rollout_ref.model.path: /home/ma-user/work/models/Qwen2.5-7B
backend_config.actor_rollout_ref.actor.optim.lr: 1e-6
backend_config.actor_rollout_ref.actor.ppo_mini_batch_size: 32
backend_config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu: 2
backend_config.actor_rollout_ref.rollout.n: 4
backend_config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu: 4
backend_config.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu: 4
backend_config.algorithm.adv_estimator: grpo
backend_config.trainer.nnodes: 1
backend_config.trainer.n_gpus_per_node: 8
"""


def test_modelarts_table_with_lr_1e_6_validates(tmp_path: Path) -> None:
    from kuberl_api.validation import load_documents

    path = tmp_path / "modelarts.yaml"
    path.write_text(MODELARTS)
    (doc,) = load_documents(path)
    result = validate_document(doc)
    assert result.errors == []
    assert result.backend_config is not None
    assert result.backend_config.actor_rollout_ref.actor.optim.lr == 1e-6
    assert result.backend_config.actor_rollout_ref.rollout.n == 4


def _base() -> dict:
    return {
        "data": {"train_files": "/d.parquet", "train_batch_size": 16},
        "actor_rollout_ref": {
            "model": {"path": "/m"},
            "actor": {"ppo_mini_batch_size": 8, "ppo_micro_batch_size_per_gpu": 2},
            "rollout": {"n": 2, "log_prob_micro_batch_size_per_gpu": 2},
            "ref": {"log_prob_micro_batch_size_per_gpu": 2},
        },
        "critic": {"ppo_micro_batch_size_per_gpu": 2},
        "algorithm": {"adv_estimator": "gae"},
        "trainer": {"nnodes": 1, "n_gpus_per_node": 2, "device": "cpu"},
    }


# A value each deprecated key can take, and the replacement value it must become.
CONVERSIONS: dict[str, tuple[Any, Any]] = {
    "val_batch_size": (4, None),  # no replacement: verl validates in one batch
    "ppo_micro_batch_size": (8, 4),  # global → per GPU over 2 ranks
    "log_prob_micro_batch_size": (8, 4),
    "forward_micro_batch_size": (8, 4),
    "micro_batch_size": (8, 4),
    "warmup_style": ("cosine", "cosine"),
    "grad_offload": (True, True),
    "remove_previous_ckpt_in_save": (True, 1),
}


def _replacement_path(node: str, replacement: str) -> str:
    return node + "." + replacement.split(":")[0]


@pytest.mark.parametrize(("node", "key", "replacement"), DEPRECATED_KEYS)
def test_deprecated_key_is_converted_and_warned_once(node: str, key: str, replacement: str) -> None:
    old, new = CONVERSIONS[key]
    tree = _base()
    target = _replacement_path(node, replacement)
    if key != "val_batch_size":
        set_dotted(tree, target, None)
    set_dotted(tree, f"{node}.{key}", old)
    result = _validate(tree)
    assert result.errors == [], [p.render() for p in result.errors]
    warnings = [p for p in result.warnings if p.path == f"{node}.{key}"]
    assert len(warnings) == 1 and "deprecated" in warnings[0].message
    if key == "warmup_style":  # the plan decides the schedule (plan/common.py optim_section)
        plan = build_run_plan(result.backend_config)
        role = plan.actor if node.startswith("actor_rollout_ref") else plan.critic
        assert role.optim.lr_scheduler_type == new
    elif new is not None:
        value: Any = result.backend_config.model_dump()
        for part in target.split("."):
            value = value[part]
        assert value == new


@pytest.mark.parametrize(("node", "key", "replacement"), DEPRECATED_KEYS)
def test_null_deprecated_key_is_unset(node: str, key: str, replacement: str) -> None:
    tree = _base()
    set_dotted(tree, f"{node}.{key}", None)
    result = _validate(tree)
    assert result.errors == []
    assert not [p for p in result.problems if p.path == f"{node}.{key}"]


PAIRS = [
    d for d in DEPRECATED_KEYS if d[1] not in ("val_batch_size", "remove_previous_ckpt_in_save")
]


@pytest.mark.parametrize(("node", "key", "replacement"), PAIRS)
def test_both_spellings_with_different_values_is_one_error(
    node: str, key: str, replacement: str
) -> None:
    old, _ = CONVERSIONS[key]
    tree = _base()
    different = {8: 3, "cosine": "constant", True: False}[old]
    set_dotted(tree, f"{node}.{key}", old)
    set_dotted(tree, _replacement_path(node, replacement), different)
    errors = [p for p in _validate(tree).errors if p.path == f"{node}.{key}"]
    assert len(errors) == 1 and "both" in errors[0].message


@pytest.mark.parametrize(("subtree", "switch", "off", "fix"), SWITCHES)
def test_switching_a_verl_feature_on_is_refused(
    subtree: str, switch: str, off: tuple, fix: str
) -> None:
    on = (
        "on"
        if isinstance(off[0], str) or off[0] is None
        else (not off[0] if isinstance(off[0], bool) else 8)
    )
    tree = _verl_default()
    set_dotted(tree, f"{subtree}.{switch}", on)
    result = _validate(tree)
    errors = [p for p in result.errors if p.path == f"{subtree}.{switch}"]
    assert len(errors) == 1, [p.render() for p in result.errors]
    assert "remove it or set" in errors[0].hint


def test_missing_mandatory_value_is_unset() -> None:
    tree = _verl_default()
    assert tree["actor_rollout_ref"]["rollout"]["name"] == "???"
    assert _validate(tree).backend_config.actor_rollout_ref.rollout.name == "vllm"


@pytest.mark.parametrize(
    ("where", "other"),
    [("rollout", "rollout.val_kwargs"), ("rollout.val_kwargs", "rollout")],
)
def test_each_sampling_switch_is_checked_against_its_own_temperature(
    where: str, other: str
) -> None:
    tree = _base()
    set_dotted(tree, f"{AR}{where}.do_sample", True)
    set_dotted(tree, f"{AR}{where}.temperature", 0.0)
    set_dotted(tree, f"{AR}{other}.do_sample", False)
    set_dotted(tree, f"{AR}{other}.temperature", 0.7)
    errors = [p.path for p in _validate(tree).errors]
    assert errors == [f"{AR}{where}.temperature"]
