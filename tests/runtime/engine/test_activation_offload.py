"""`model.enable_activation_offload`: the update's saved activations wait for backward in host
memory (`torch.autograd.graph.save_on_cpu`), as verl's activation offload keeps them off the
accelerator. Training with it is bitwise the training without it (FSDP2 on one CPU rank, two
mini-batches), and what autograd saves goes through the offload: an outer saved-tensor hook (one
the offload's own hooks stand in front of) sees every activation the plain update saves and none
of the offloaded update's."""

from __future__ import annotations

import pytest
import torch

from kuberl_api.plan.standalone import actor_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm
from tests.runtime.engine.conftest import fixed_batch

pytestmark = pytest.mark.usefixtures("process_group")

ROWS = 8


def _actor(tiny_model_path, offload: bool) -> Actor:
    node = {"ppo_mini_batch_size": ROWS // 2, "ppo_micro_batch_size_per_gpu": 2}
    plan = actor_plan(node).model_copy(update={"activation_offload": offload})
    torch.manual_seed(0)
    model = build_causal_lm(ModelSpec(path=str(tiny_model_path)))
    model = apply_fsdp(model, plan.fsdp_config, Device("cpu"))
    settings = ActorSettings(
        temperature=1.0, use_remove_padding=False, rollout_n=1, world_size=1, total_training_steps=2
    )
    return Actor(model, plan, settings)


def _update_counting_saved(actor: Actor, batch) -> tuple[dict, int]:
    saved = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal saved
        saved += 1
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        metrics = actor.update_policy(batch)
    return metrics, saved


def test_the_update_saves_its_activations_through_the_offload_and_trains_alike(
    tiny_model_path, tokenizer
):
    batch = fixed_batch(tokenizer, rows=ROWS)
    mask = batch["response_mask"]
    batch["old_log_probs"] = (
        -torch.rand(mask.shape, generator=torch.Generator().manual_seed(1)) - 4
    ) * mask
    plain, offloaded = _actor(tiny_model_path, False), _actor(tiny_model_path, True)
    plain_metrics, plain_saved = _update_counting_saved(plain, batch)
    offloaded_metrics, offloaded_saved = _update_counting_saved(offloaded, batch)
    assert plain_saved > 100 and offloaded_saved == 0, (plain_saved, offloaded_saved)
    assert plain_metrics == offloaded_metrics
    for (name, a), b in zip(
        plain.model.named_parameters(), offloaded.model.parameters(), strict=True
    ):
        assert torch.equal(a.full_tensor(), b.full_tensor()), name
