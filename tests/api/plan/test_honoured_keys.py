"""The plan carries the keys H-honour implemented, resolved the way verl 0.9.1 reads them."""

import pytest

from tests.api.plan.test_build import plan_of, with_keys

A = "actor_rollout_ref__actor__"


def test_optim_clip_grad_is_the_clip_verl_091_applies() -> None:
    assert plan_of(with_keys(**{A + "optim__clip_grad": 0.25})).actor.grad_clip == 0.25
    # Written in both places, verl 0.9.1's engine uses optim.clip_grad.
    both = with_keys(**{A + "optim__clip_grad": 0.25, A + "grad_clip": 3.0})
    assert plan_of(both).actor.grad_clip == 0.25
    # Only the older role-level key: it still decides.
    assert plan_of(with_keys(**{A + "grad_clip": 3.0})).actor.grad_clip == 3.0
    critic = with_keys(critic__optim__clip_grad=0.5)
    assert plan_of(critic).critic.grad_clip == 0.5


@pytest.mark.parametrize(
    ("key", "value", "read"),
    [
        (A + "fsdp_config__model_dtype", "bf16", lambda p: p.actor.fsdp_config.model_dtype),
        (
            "reward_model__model__fsdp_config__param_offload",
            True,
            lambda p: p.reward_model.fsdp_config.param_offload,
        ),
        (
            "reward_model__model__input_tokenizer",
            "/rm-tok",
            lambda p: p.reward_model.input_tokenizer,
        ),
        ("trainer__balance_batch", False, lambda p: p.trainer.balance_batch),
        (
            "actor_rollout_ref__model__custom_chat_template",
            "{{ x }}",
            lambda p: p.model.custom_chat_template,
        ),
        # An adapter loads into LoRA layers: its path counts with lora_rank > 0 (rules_start.py).
        (
            ("actor_rollout_ref__model__lora_adapter_path", "actor_rollout_ref__model__lora_rank"),
            ("/a", 8),
            lambda p: (p.model.lora_adapter_path, p.model.lora_rank),
        ),
        ("data__custom_cls", {"path": "/d.py", "name": "D"}, lambda p: p.data.custom_cls.name),
    ],
)
def test_each_key_reaches_the_plan(key, value, read) -> None:
    expected = value["name"] if isinstance(value, dict) else value
    keys = dict(zip(key, value, strict=True)) if isinstance(key, tuple) else {key: value}
    assert read(plan_of(with_keys(**keys))) == expected


def test_load_contents_defaults_to_save_contents() -> None:
    plan = plan_of(with_keys(**{A + "checkpoint__save_contents": ["model", "hf_model"]}))
    assert plan.actor.checkpoint.load_contents == ["model", "hf_model"]
    plan = plan_of(
        with_keys(
            **{A + "checkpoint__save_contents": ["model"], A + "checkpoint__load_contents": []}
        )
    )
    assert plan.actor.checkpoint.load_contents == []
