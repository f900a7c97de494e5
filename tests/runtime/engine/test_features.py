"""LoRA, gradient checkpointing and remove-padding give the plain path's log-probs and losses."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from kuberl_api.plan.standalone import actor_plan, critic_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.critic import Critic
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.micro import MicroBatching
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm, build_value_model
from tests.runtime.engine.conftest import fixed_batch

pytestmark = pytest.mark.usefixtures("process_group")

CPU = Device("cpu")
ACTOR = actor_plan(
    {
        "ppo_mini_batch_size": 4,
        "ppo_micro_batch_size_per_gpu": 2,
        "use_kl_loss": True,
        "entropy_coeff": 0.01,
        "optim": {"lr": 1e-3},
    },
    rollout_n=2,
)


def make_actor(path, *, rmpad=False, gc=False, lora=0) -> Actor:
    spec = ModelSpec(path=str(path), enable_gradient_checkpointing=gc, lora_rank=lora)
    torch.manual_seed(0)
    model = apply_fsdp(build_causal_lm(spec), ACTOR.fsdp_config, CPU)
    settings = ActorSettings(
        temperature=1.0, use_remove_padding=rmpad, rollout_n=2, world_size=1, total_training_steps=4
    )
    ref = None
    if not lora:
        ref = apply_fsdp(
            build_causal_lm(replace(spec, enable_gradient_checkpointing=False)),
            ACTOR.fsdp_config,
            CPU,
        )
    return Actor(model, ACTOR, settings, ref_model=ref)


def run_update(actor: Actor, tokenizer):
    batch = fixed_batch(tokenizer)
    batching = MicroBatching(micro_batch_size=3)
    out = actor.compute_log_prob(batch, batching, calculate_entropy=True)
    batch["old_log_probs"] = out["old_log_probs"]
    batch["ref_log_prob"] = actor.compute_ref_log_prob(batch, batching)
    metrics = actor.update_policy(batch)
    return out, metrics


@pytest.fixture(scope="module")
def plain(tiny_model_path, process_group, tokenizer):
    return run_update(make_actor(tiny_model_path), tokenizer)


@pytest.mark.parametrize(
    "variant", [{"rmpad": True}, {"gc": True}, {"lora": 8}, {"rmpad": True, "gc": True}]
)
def test_variant_matches_plain_loss(variant, plain, tiny_model_path, tokenizer):
    plain_out, plain_metrics = plain
    out, metrics = run_update(make_actor(tiny_model_path, **variant), tokenizer)
    mask = fixed_batch(tokenizer)["response_mask"].bool()
    torch.testing.assert_close(
        out["old_log_probs"][mask], plain_out["old_log_probs"][mask], atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        out["entropys"][mask], plain_out["entropys"][mask], atol=1e-5, rtol=1e-5
    )
    # The first mini-batch starts from identical weights, so its losses agree.
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/entropy"):
        assert metrics[key][0] == pytest.approx(plain_metrics[key][0], abs=1e-5), key


def test_lora_reference_is_the_base_model(tiny_model_path, tokenizer):
    actor = make_actor(tiny_model_path, lora=8)
    batch = fixed_batch(tokenizer)
    batching = MicroBatching(micro_batch_size=4)
    base = actor.compute_log_prob(batch, batching)["old_log_probs"]
    batch["old_log_probs"] = base
    batch["ref_log_prob"] = base
    actor.update_policy(batch)
    after = actor.compute_log_prob(batch, batching)["old_log_probs"]
    ref = actor.compute_ref_log_prob(batch, batching)
    mask = batch["response_mask"].bool()
    assert not torch.allclose(after[mask], base[mask]), "adapters did not train"
    torch.testing.assert_close(ref[mask], base[mask])


def test_dynamic_bsz_matches_fixed_micro_batches(tiny_model_path, tokenizer):
    actor = make_actor(tiny_model_path)
    batch = fixed_batch(tokenizer)
    fixed = actor.compute_log_prob(batch, MicroBatching(micro_batch_size=2))["old_log_probs"]
    dynamic = actor.compute_log_prob(batch, MicroBatching(use_dynamic_bsz=True, max_token_len=40))[
        "old_log_probs"
    ]
    torch.testing.assert_close(dynamic, fixed, atol=1e-5, rtol=1e-5)


def test_critic_remove_padding_matches_padded(tiny_model_path, tokenizer):
    values = {}
    for rmpad in (False, True):
        cfg = critic_plan(
            {
                "ppo_mini_batch_size": 4,
                "ppo_micro_batch_size_per_gpu": 2,
                "forward_micro_batch_size_per_gpu": 4,
                "forward_max_token_len_per_gpu": 16384,
                "ppo_epochs": 1,
                "loss_agg_mode": "token-mean",
                "model": {"use_remove_padding": rmpad},
            }
        )
        torch.manual_seed(0)
        model = build_value_model(ModelSpec(path=str(tiny_model_path)))
        critic = Critic(
            apply_fsdp(model, cfg.model.fsdp_config, CPU),
            cfg,
            rollout_n=2,
            world_size=1,
            total_training_steps=2,
        )
        values[rmpad] = critic.compute_values(fixed_batch(tokenizer))
    torch.testing.assert_close(values[True], values[False], atol=1e-5, rtol=1e-5)
