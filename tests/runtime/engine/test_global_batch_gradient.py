"""The actor's and the critic's mini-batch gradient is verl 0.9.1's engine-worker gradient.

Each micro-batch's loss is aggregated with the whole mini-batch's counts (`GlobalBatch`), so the
gradient accumulated over uneven micro-batches (fixed sizes 3+3+2, or cut by a token budget) equals
the gradient of verl's loss over the whole mini-batch at once: `core_algos` composed as verl's
`workers/utils/losses.py` composes it (`ppo_loss`: policy loss, − entropy_coeff · entropy,
+ kl_loss_coef · KL, all through `agg_loss(**global_batch_info)` with the actor's
`loss_scale_factor`; `value_loss`: `compute_value_loss` with the same counts). The legacy
per-row weighting the engine used before fails this for every mode but seq-mean with equal rows.
"""

from __future__ import annotations

import pytest
import torch
from verl.trainer.ppo import core_algos

from kuberl_api.plan.standalone import actor_plan, critic_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine import actor as actor_module
from kuberl_runtime.engine import critic as critic_module
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.critic import Critic
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.logprob import forward_responses
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm, build_value_model
from tests.runtime.algorithms.verl_oracle import actor_config
from tests.runtime.engine.conftest import fixed_batch

pytestmark = pytest.mark.usefixtures("process_group")

CPU = Device("cpu")
ROWS = 8
SPLITS = {
    "fixed 3+3+2": {"ppo_micro_batch_size_per_gpu": 3},
    "dynamic": {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 50},
}
MODES = {
    "token-mean": {},
    "seq-mean-token-mean": {},
    "seq-mean-token-sum-norm": {"loss_scale_factor": 7.0},
}


def _captured_grads(monkeypatch, module) -> list[dict[str, torch.Tensor]]:
    """Each optimizer step of `module`'s update records the gradients and drops them instead."""
    steps: list[dict[str, torch.Tensor]] = []

    def capture(model, optimizer, max_norm):
        steps.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        optimizer.zero_grad(set_to_none=True)
        return 0.0, True

    monkeypatch.setattr(module, "clip_and_step", capture)
    return steps


def _batch(tokenizer):
    batch = fixed_batch(tokenizer, rows=ROWS)
    gen = torch.Generator().manual_seed(1)
    mask = batch["response_mask"]
    shape = mask.shape
    batch["old_log_probs"] = (-torch.rand(shape, generator=gen) * 4 - 4) * mask
    batch["ref_log_prob"] = (-torch.rand(shape, generator=gen) * 4 - 4) * mask
    batch["values"] = torch.randn(shape, generator=gen) * mask
    batch["returns"] = torch.randn(shape, generator=gen) * mask
    return batch


def _sizes_of_splits(monkeypatch, module) -> list[list[int]]:
    """The micro-batch sizes the update used, to prove the split is uneven."""
    seen: list[list[int]] = []
    real = module.MicroBatching.split

    def split(self, batch):
        groups = real(self, batch)
        seen.append([len(g) for g in groups])
        return groups

    monkeypatch.setattr(module.MicroBatching, "split", split)
    return seen


def _assert_same_grads(ours: dict[str, torch.Tensor], model: torch.nn.Module) -> None:
    theirs = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert ours.keys() == theirs.keys()
    for name, grad in ours.items():
        torch.testing.assert_close(grad, theirs[name], atol=2e-6, rtol=1e-4, msg=name)


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("mode", MODES)
def test_actor_gradient_equals_verl_over_the_whole_mini_batch(
    mode, split, monkeypatch, tiny_model_path, tokenizer
):
    node = {
        "ppo_mini_batch_size": ROWS,
        "ppo_epochs": 1,
        "loss_agg_mode": mode,
        "entropy_coeff": 0.01,
        "use_kl_loss": True,
        "kl_loss_coef": 0.5,
        "clip_ratio_low": 0.2,
        "clip_ratio_high": 0.28,
        **MODES[mode],
        **SPLITS[split],
    }
    plan = actor_plan(node, rollout_n=1, dp_size=1)
    torch.manual_seed(0)
    model = apply_fsdp(build_causal_lm(ModelSpec(path=str(tiny_model_path))), plan.fsdp_config, CPU)
    settings = ActorSettings(
        temperature=1.0, use_remove_padding=False, rollout_n=1, world_size=1, total_training_steps=1
    )
    actor = Actor(model, plan, settings)
    batch = _batch(tokenizer)
    batch["advantages"] = batch["advantages"] * 3
    steps = _captured_grads(monkeypatch, actor_module)
    sizes = _sizes_of_splits(monkeypatch, actor_module)
    actor.update_policy(batch)
    assert len(sizes[0]) > 1 and len(set(sizes[0])) > 1, sizes  # uneven micro-batches

    out = forward_responses(model, batch.tensors, calculate_entropy=True)
    mask = batch["response_mask"].bool()
    config = actor_config(
        loss_agg_mode=mode, clip_ratio_low=0.2, clip_ratio_high=0.28, ppo_mini_batch_size=ROWS
    )
    info = {
        "dp_size": 1,
        "batch_num_tokens": int(mask.sum()),
        "global_batch_size": ROWS,
        "loss_scale_factor": plan.loss_scale_factor,
    }
    config.global_batch_info.update(info)
    pg_loss, _ = core_algos.get_policy_loss_fn("vanilla")(
        old_log_prob=batch["old_log_probs"],
        log_prob=out.log_probs,
        advantages=batch["advantages"],
        response_mask=mask,
        loss_agg_mode=mode,
        config=config,
    )
    entropy = core_algos.agg_loss(out.entropy, mask, mode, **info)
    kld = core_algos.kl_penalty(out.log_probs, batch["ref_log_prob"], kl_penalty="low_var_kl")
    kl = core_algos.agg_loss(kld, mask, mode, **info)
    (pg_loss - 0.01 * entropy + 0.5 * kl).backward()
    _assert_same_grads(steps[0], model)


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("mode", MODES)
def test_critic_gradient_equals_verl_over_the_whole_mini_batch(
    mode, split, monkeypatch, tiny_model_path, tokenizer
):
    node = {
        "ppo_mini_batch_size": ROWS,
        "ppo_epochs": 1,
        "loss_agg_mode": mode,
        "forward_max_token_len_per_gpu": 16384,
        "cliprange_value": 0.3,
        **MODES[mode],
        **SPLITS[split],
    }
    plan = critic_plan(node)
    torch.manual_seed(0)
    model = build_value_model(ModelSpec(path=str(tiny_model_path)))
    model = apply_fsdp(model, plan.model.fsdp_config, CPU)
    critic = Critic(model, plan, rollout_n=1, world_size=1, total_training_steps=1)
    batch = _batch(tokenizer)
    steps = _captured_grads(monkeypatch, critic_module)
    sizes = _sizes_of_splits(monkeypatch, critic_module)
    critic.update_critic(batch)
    assert len(sizes[0]) > 1 and len(set(sizes[0])) > 1, sizes

    vpreds = forward_responses(model, batch.tensors, value_head=True).values
    mask = batch["response_mask"].bool()
    loss, _ = core_algos.compute_value_loss(
        vpreds,
        batch["returns"],
        batch["values"],
        mask,
        0.3,
        mode,
        dp_size=1,
        batch_num_tokens=int(mask.sum()),
        global_batch_size=ROWS,
        loss_scale_factor=plan.loss_scale_factor,
    )
    loss.backward()
    _assert_same_grads(steps[0], model)
