"""``build_run_plan``: every value a run reads, resolved once, frozen, and the same after JSON."""

import copy
import types
import typing
from pathlib import Path

import pydantic
import pytest
import yaml

from kuberl_api.plan import RunPlan, build_run_plan
from kuberl_api.plan.sections import Frozen
from kuberl_api.plan.sft import build_sft_plan
from kuberl_api.validation import Document, DocumentKind, load_documents, validate_document

ROOT = Path(__file__).resolve().parents[3]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())


def plan_of(tree: dict) -> RunPlan:
    result = validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))
    assert result.ok, [p.render() for p in result.errors]
    return build_run_plan(result.backend_config, result.af_output_dir)


def with_keys(**dotted) -> dict:
    tree = copy.deepcopy(DEMO)
    for key, value in dotted.items():
        *parents, leaf = key.split("__")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def _optional_fields(model: type[pydantic.BaseModel], prefix: str = "") -> list[str]:
    found = []
    for name, field in model.model_fields.items():
        args = typing.get_args(field.annotation)
        origin = typing.get_origin(field.annotation)
        if origin in (typing.Union, types.UnionType) and type(None) in args:
            found.append(prefix + name)
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, Frozen):
            found += _optional_fields(sub, f"{prefix}{name}.")
    return found


def test_the_plan_has_no_optional_field_but_the_documented_one():
    assert _optional_fields(RunPlan) == ["actor.loss_scale_factor", "critic.loss_scale_factor"]


def test_the_plan_is_frozen():
    plan = plan_of(DEMO)
    with pytest.raises(pydantic.ValidationError):
        plan.actor.ppo_epochs = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "example",
    ["demo.yaml", "grpo-gsm8k.yaml", "ppo-gsm8k.yaml", "modelarts-verl.yaml", "roll-rlvr.yaml"],
)
def test_every_example_plans_and_round_trips_through_json(example):
    result = validate_document(load_documents(ROOT / "examples" / example)[0])
    plan = build_run_plan(result.backend_config, result.af_output_dir)
    assert RunPlan.from_json(plan.to_json()) == plan


def test_placement_is_derived_once_from_the_pools():
    result = validate_document(load_documents(ROOT / "examples/grpo-gsm8k.yaml")[0])
    plan = build_run_plan(result.backend_config, result.af_output_dir)
    placement = plan.placement
    assert (placement.nnodes, placement.n_gpus_per_node, placement.device) == (2, 8, "cuda")
    assert placement.world_size == placement.dp_size == 16
    assert placement.sp_size == 1
    actor, n = plan.actor, plan.rollout.n
    assert actor.mini_batch_rows_per_rank == actor.ppo_mini_batch_size * n // 16


def test_paths_hang_under_af_output_dir():
    result = validate_document(load_documents(ROOT / "examples/grpo-gsm8k.yaml")[0])
    paths = build_run_plan(result.backend_config, result.af_output_dir).paths
    assert paths.output_dir == "/mnt/af/grpo-gsm8k"
    assert paths.checkpoint_dir.startswith("/mnt/af/grpo-gsm8k/checkpoints/")
    assert paths.logs_dir == "/mnt/af/grpo-gsm8k/logs"
    assert paths.hf_export_dir == "/mnt/af/grpo-gsm8k/huggingface"


def test_a_bare_config_without_device_or_pools_leaves_the_device_to_the_machine():
    tree = with_keys()
    del tree["trainer"]["device"]
    assert plan_of(tree).placement.device == "auto"


def test_deprecated_global_micro_batches_become_per_gpu_ones():
    tree = with_keys(
        actor_rollout_ref__actor__ppo_micro_batch_size=8,
        critic__forward_micro_batch_size=6,
        reward_model__micro_batch_size=4,
        algorithm__adv_estimator="gae",
        critic__ppo_micro_batch_size_per_gpu=2,
    )
    del tree["actor_rollout_ref"]["actor"]["ppo_micro_batch_size_per_gpu"]
    plan = plan_of(tree)
    assert plan.actor.ppo_micro_batch_size_per_gpu == 8 // 2
    assert plan.critic.forward_micro_batch_size_per_gpu == 6 // 2
    assert plan.reward_model.micro_batch_size_per_gpu == 4 // 2


@pytest.mark.parametrize(("critic_value", "expected"), [(None, 7.0), (3.0, 3.0)])
def test_critic_loss_scale_factor_follows_the_actors_unless_written(critic_value, expected):
    """verl 0.9.1: critic.loss_scale_factor is ${oc.select:actor...loss_scale_factor,null}."""
    keys = {"critic__loss_scale_factor": critic_value} if critic_value is not None else {}
    plan = plan_of(
        with_keys(
            actor_rollout_ref__actor__loss_scale_factor=7.0,
            algorithm__adv_estimator="gae",
            critic__ppo_micro_batch_size_per_gpu=2,
            **keys,
        )
    )
    assert (plan.actor.loss_scale_factor, plan.critic.loss_scale_factor) == (7.0, expected)


def test_deprecated_warmup_style_is_converted_for_actor_and_critic():
    plan = plan_of(
        with_keys(
            actor_rollout_ref__actor__optim={"lr": 1e-3, "warmup_style": "cosine"},
            critic__optim={"lr": 1e-3, "warmup_style": "cosine"},
            algorithm__adv_estimator="gae",
            critic__ppo_micro_batch_size_per_gpu=2,
        )
    )
    assert plan.actor.optim.lr_scheduler_type == "cosine"
    assert plan.critic.optim.lr_scheduler_type == "cosine"


def test_followed_defaults_are_filled():
    plan = plan_of(
        with_keys(algorithm__adv_estimator="gae", critic__ppo_micro_batch_size_per_gpu=2)
    )
    data = DEMO["data"]
    assert plan.rollout.prompt_length == data["max_prompt_length"]
    assert plan.rollout.response_length == data["max_response_length"]
    assert plan.rollout.max_model_len == data["max_prompt_length"] + data["max_response_length"]
    assert plan.critic.enable is True
    assert plan.critic.ppo_mini_batch_size == plan.actor.ppo_mini_batch_size
    assert plan.critic.model.path == plan.model.path
    assert plan.ref.log_prob_max_token_len_per_gpu == plan.actor.ppo_max_token_len_per_gpu
    assert plan.actor.clip_ratio_low == plan.actor.clip_ratio_high == plan.actor.clip_ratio
    assert plan.data.tokenizer == plan.model.path


def test_reference_is_a_separate_model_only_without_lora():
    assert plan_of(DEMO).ref.enabled and plan_of(DEMO).ref.separate_model
    lora = plan_of(with_keys(actor_rollout_ref__model__lora_rank=4))
    assert lora.ref.enabled and not lora.ref.separate_model


def test_checkpoint_retention_keeps_the_smallest_limit():
    plan = plan_of(with_keys(trainer__remove_previous_ckpt_in_save=True))
    assert plan.trainer.max_ckpt_to_keep == 1
    assert plan_of(DEMO).trainer.max_ckpt_to_keep == (
        DEMO["trainer"].get("max_actor_ckpt_to_keep") or 0
    )


def test_verls_generated_default_config_plans():
    """verl 0.9.1's complete default config (what every verl user starts from) plans too."""
    from tests.api.test_verl_parity import _validate, _verl_default

    result = _validate(_verl_default())
    assert result.ok, [p.render() for p in result.errors]
    plan = build_run_plan(result.backend_config, result.af_output_dir)
    assert plan.placement.world_size == 8
    assert plan.rollout.n == 1 and plan.critic.enable
    assert RunPlan.from_json(plan.to_json()) == plan
    assert result.at_verl_default, "verl's config sets keys kuberl accepts without effect"


@pytest.mark.parametrize(
    "mode",
    [
        "token-mean",
        "token-sum",
        "seq-mean-token-sum",
        "seq-mean-token-mean",
        "seq-mean-token-sum-norm",
    ],
)
def test_every_verl_loss_agg_mode_reaches_actor_and_critic(mode):
    """verl 0.9.1's ActorConfig accepts exactly these five (its valid_loss_agg_modes)."""
    plan = plan_of(
        with_keys(
            actor_rollout_ref__actor__loss_agg_mode=mode,
            algorithm__adv_estimator="gae",
            critic__ppo_micro_batch_size_per_gpu=2,
        )
    )
    assert (plan.actor.loss_agg_mode, plan.critic.loss_agg_mode) == (mode, mode)


def test_the_accepted_modes_are_the_runtimes():
    import typing

    from kuberl_api.backend_config.actor import LossAggMode
    from kuberl_runtime.algorithms import LOSS_AGG_MODES

    assert set(typing.get_args(LossAggMode)) == set(LOSS_AGG_MODES)


def test_gspo_keeps_the_configured_aggregation_without_a_warning():
    tree = with_keys(
        actor_rollout_ref__actor__policy_loss={"loss_mode": "gspo"},
        actor_rollout_ref__actor__loss_agg_mode="token-mean",
    )
    result = validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))
    assert result.ok and not [p for p in result.warnings if "loss_agg_mode" in p.path]
    assert build_run_plan(result.backend_config).actor.loss_agg_mode == "token-mean"


@pytest.mark.parametrize(("style", "refused"), [("cosine", True), ("constant", False)])
def test_sft_warmup_style_beside_another_schedule_is_refused_as_for_rl(style, refused):
    """The SFT tree checks its deprecated warmup_style as the RL tree does: set differently from
    lr_scheduler_type it is an error naming the key (it used to be accepted and ignored)."""
    sft = yaml.safe_load((ROOT / "examples/demo-sft.yaml").read_text())
    sft["optim"].update(lr_scheduler_type="constant", warmup_style=style)
    result = validate_document(Document(DocumentKind.SFT, sft, "", "sft.yaml", {}))
    errors = [p.render() for p in result.errors]
    assert bool(errors) is refused, errors
    if refused:
        assert "optim.warmup_style: both warmup_style and lr_scheduler_type" in errors[0]
    else:
        assert any(p.path == "optim.warmup_style" for p in result.warnings)


def test_sft_warmup_style_alone_decides_the_schedule():
    sft = yaml.safe_load((ROOT / "examples/demo-sft.yaml").read_text())
    sft["optim"].pop("lr_scheduler_type")
    sft["optim"]["warmup_style"] = "cosine"
    result = validate_document(Document(DocumentKind.SFT, sft, "", "sft.yaml", {}))
    assert result.ok, [p.render() for p in result.problems]
    assert build_sft_plan(result.sft_config, None).optim.lr_scheduler_type == "cosine"
