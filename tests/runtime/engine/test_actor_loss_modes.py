"""The actor trains with verl 0.9.1's other loss modes as the plan sets them: one update with
`optim.optimizer: SGD` (lr 1, no weight decay, no clipping) moves each parameter by minus verl's
gradient of `core_algos.get_policy_loss_fn(mode)` over the same mini-batch, configured from the
same keys (clip ranges, `policy_loss.*`, `tau_pos`/`tau_neg`). One micro-batch, so GMPO's
per-micro-batch row mean (verl's) is the mini-batch's."""

from __future__ import annotations

import pytest
import torch
from verl.trainer.ppo import core_algos

from kuberl_api.plan.standalone import actor_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.logprob import forward_responses
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm
from tests.runtime.algorithms.verl_oracle import PolicyLossConfig, actor_config
from tests.runtime.engine.conftest import fixed_batch

pytestmark = pytest.mark.usefixtures("process_group")

ROWS = 8
MODES = {
    "sapo": {"tau_pos": 2.0, "tau_neg": 3.0},
    "cispo": {"clip_ratio_low": 10.0, "clip_ratio_high": 0.1},
    "geo_mean": {"clip_ratio_low": 0.1, "clip_ratio_high": 0.1},
    "dppo_kl": {"clip_ratio_c": 1.5, "clip_ratio_low": 0.01, "clip_ratio_high": 0.01},
    "kl_cov": {"policy_loss": {"kl_cov_ratio": 0.2, "ppo_kl_coef": 2.0}},
    "dro": {"policy_loss": {"dro_beta": 0.7}},
}


def _batch(tokenizer):
    batch = fixed_batch(tokenizer, rows=ROWS)
    gen = torch.Generator().manual_seed(3)
    mask = batch["response_mask"]
    batch["old_log_probs"] = (-torch.rand(mask.shape, generator=gen) * 4 - 4) * mask
    batch["advantages"] = batch["advantages"] * 3
    return batch


def _verl_config(mode: str, settings: dict):
    settings = dict(settings)
    policy_loss = PolicyLossConfig(loss_mode=mode, **settings.pop("policy_loss", {}))
    config = actor_config(ppo_mini_batch_size=ROWS, policy_loss=policy_loss, **settings)
    return config


@pytest.mark.parametrize("mode", MODES)
def test_one_sgd_update_moves_by_verls_gradient(mode, tiny_model_path, tokenizer):
    settings = MODES[mode]
    node = {
        "ppo_mini_batch_size": ROWS,
        "ppo_micro_batch_size_per_gpu": ROWS,
        "grad_clip": 1e9,
        "optim": {"optimizer": "SGD", "lr": 1.0, "weight_decay": 0.0},
        **settings,
        "policy_loss": {"loss_mode": mode, **settings.get("policy_loss", {})},
    }
    plan = actor_plan(node)
    torch.manual_seed(0)
    model = apply_fsdp(
        build_causal_lm(ModelSpec(path=str(tiny_model_path))), plan.fsdp_config, Device("cpu")
    )
    before = {n: p.detach().full_tensor().clone() for n, p in model.named_parameters()}
    batch = _batch(tokenizer)

    out = forward_responses(model, batch.tensors, calculate_entropy=False)
    config = _verl_config(mode, settings)
    mask = batch["response_mask"].bool()
    info = {"dp_size": 1, "batch_num_tokens": int(mask.sum()), "global_batch_size": ROWS}
    config.global_batch_info.update(info, loss_scale_factor=None)
    loss, _ = core_algos.get_policy_loss_fn(mode)(
        old_log_prob=batch["old_log_probs"],
        log_prob=out.log_probs,
        advantages=batch["advantages"],
        response_mask=mask,
        loss_agg_mode="token-mean",
        config=config,
    )
    loss.backward()
    verl_grads = {n: p.grad.full_tensor().clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)

    settings_ = ActorSettings(
        temperature=1.0, use_remove_padding=False, rollout_n=1, world_size=1, total_training_steps=1
    )
    metrics = Actor(model, plan, settings_).update_policy(batch)
    assert metrics["actor/pg_loss"] == [pytest.approx(loss.item(), rel=1e-4, abs=1e-6)]
    moved = 0
    for name, param in model.named_parameters():
        step = before[name] - param.detach().full_tensor()
        torch.testing.assert_close(step, verl_grads[name], atol=2e-6, rtol=1e-3, msg=name)
        moved += int(step.abs().max() > 1e-5)
    assert moved > 0
