"""`fsdp_config.optimizer_offload`: AdamW state parked on the host between optimizer steps.

Training with it is bitwise the training without it (actor and critic, FSDP2 on one CPU rank,
two updates of two mini-batches each), and the state is where the offload puts it: on the host
after every update and on the parameters' device inside every step. On a CPU-only machine the
host is the parameters' device, so the second test watches the moves with a stand-in host whose
moves make fresh copies, as a move between two devices does.
"""

from __future__ import annotations

import pytest
import torch

from kuberl_api.plan.standalone import actor_plan, critic_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.critic import Critic
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm, build_value_model
from kuberl_runtime.engine.optim_offload import OptimizerOffload
from tests.runtime.engine.conftest import fixed_batch

pytestmark = pytest.mark.usefixtures("process_group")

CPU = Device("cpu")
ROWS = 8
UPDATES = 2
MINI_BATCHES = 2


class WatchedOffload(OptimizerOffload):
    """A stand-in host: every move makes a new tensor; the parked ones are remembered."""

    def __init__(self, optimizer: torch.optim.Optimizer, *, enabled: bool = True) -> None:
        super().__init__(optimizer, enabled=enabled)
        self.parked: list[torch.Tensor] = []
        self._parking = False

    def park(self) -> None:
        self._parking, self.parked = True, []
        super().park()
        self._parking = False

    def move(self, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        moved = tensor.to(device).clone()
        if self._parking:
            self.parked.append(moved)
        return moved

    def is_parked(self, tensor: torch.Tensor) -> bool:
        return any(tensor is parked for parked in self.parked)


def _state_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [
        value
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor) and value.dim() > 0
    ]


def _batch(tokenizer):
    batch = fixed_batch(tokenizer, rows=ROWS)
    gen = torch.Generator().manual_seed(1)
    mask = batch["response_mask"]
    batch["old_log_probs"] = (-torch.rand(mask.shape, generator=gen) * 4 - 4) * mask
    batch["values"] = torch.randn(mask.shape, generator=gen) * mask
    batch["returns"] = torch.randn(mask.shape, generator=gen) * mask
    return batch


def _actor(tiny_model_path, offload: bool) -> Actor:
    node = {
        "ppo_mini_batch_size": ROWS // MINI_BATCHES,
        "ppo_micro_batch_size_per_gpu": 2,
        "fsdp_config": {"optimizer_offload": offload},
    }
    plan = actor_plan(node, rollout_n=1, dp_size=1)
    torch.manual_seed(0)
    model = apply_fsdp(build_causal_lm(ModelSpec(path=str(tiny_model_path))), plan.fsdp_config, CPU)
    settings = ActorSettings(
        temperature=1.0, use_remove_padding=False, rollout_n=1, world_size=1, total_training_steps=4
    )
    return Actor(model, plan, settings)


def _critic(tiny_model_path, offload: bool) -> Critic:
    node = {
        "ppo_mini_batch_size": ROWS // MINI_BATCHES,
        "ppo_micro_batch_size_per_gpu": 2,
        "ppo_epochs": 1,
        "loss_agg_mode": "token-mean",
        "forward_max_token_len_per_gpu": 16384,
        "model": {"fsdp_config": {"optimizer_offload": offload}},
    }
    plan = critic_plan(node)
    torch.manual_seed(0)
    model = apply_fsdp(
        build_value_model(ModelSpec(path=str(tiny_model_path))), plan.model.fsdp_config, CPU
    )
    return Critic(model, plan, rollout_n=1, world_size=1, total_training_steps=4)


def _assert_bitwise_equal(a: torch.nn.Module, b: torch.nn.Module, oa, ob) -> None:
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa.full_tensor(), pb.full_tensor()), name
    sa, sb = _state_tensors(oa), _state_tensors(ob)
    assert len(sa) == len(sb) > 0
    for ta, tb in zip(sa, sb, strict=True):
        assert torch.equal(ta.full_tensor(), tb.full_tensor())


def test_actor_trains_bitwise_equal_with_its_state_on_the_host(tiny_model_path, tokenizer):
    plain, offloaded = _actor(tiny_model_path, False), _actor(tiny_model_path, True)
    assert (plain.optimizer_offload.enabled, offloaded.optimizer_offload.enabled) == (False, True)
    batch = _batch(tokenizer)
    for _ in range(UPDATES):
        metrics = [actor.update_policy(batch) for actor in (plain, offloaded)]
        assert metrics[0] == metrics[1]
        assert offloaded.optimizer_offload.state_devices() == {offloaded.optimizer_offload.host}
    _assert_bitwise_equal(plain.model, offloaded.model, plain.optimizer, offloaded.optimizer)


def test_critic_trains_bitwise_equal_with_offload(tiny_model_path, tokenizer):
    plain, offloaded = _critic(tiny_model_path, False), _critic(tiny_model_path, True)
    assert offloaded.optimizer_offload.enabled
    batch = _batch(tokenizer)
    for _ in range(UPDATES):
        assert plain.update_critic(batch) == offloaded.update_critic(batch)
    _assert_bitwise_equal(plain.model, offloaded.model, plain.optimizer, offloaded.optimizer)


def test_the_state_is_parked_between_steps_and_fetched_for_each_step(tiny_model_path, tokenizer):
    plain, watched = _actor(tiny_model_path, False), _actor(tiny_model_path, True)
    offload = watched.optimizer_offload = WatchedOffload(watched.optimizer)
    at_step: list[tuple[int, int]] = []  # (state tensors, of which parked) when each step starts

    def seen(optimizer, args, kwargs) -> None:
        tensors = _state_tensors(optimizer)
        at_step.append((len(tensors), sum(offload.is_parked(t) for t in tensors)))

    watched.optimizer.register_step_pre_hook(seen)
    batch = _batch(tokenizer)
    moments = 2 * sum(1 for p in watched.model.parameters() if p.requires_grad)
    for _ in range(UPDATES):
        plain.update_policy(batch)
        watched.update_policy(batch)
        tensors = _state_tensors(watched.optimizer)
        assert len(tensors) == moments == len(offload.parked)
        assert all(offload.is_parked(t) for t in tensors)  # between updates: all on the host
    # The first step creates the state; every later one starts with all of it fetched back.
    assert at_step == [(0, 0)] + [(moments, 0)] * (UPDATES * MINI_BATCHES - 1)
    _assert_bitwise_equal(plain.model, watched.model, plain.optimizer, watched.optimizer)


def test_disabled_offload_moves_nothing(tiny_model_path, tokenizer):
    actor = _actor(tiny_model_path, False)
    offload = actor.optimizer_offload = WatchedOffload(actor.optimizer, enabled=False)
    actor.update_policy(_batch(tokenizer))
    before = _state_tensors(actor.optimizer)
    offload.park()
    offload.fetch()
    after = _state_tensors(actor.optimizer)
    assert before and all(a is b for a, b in zip(before, after, strict=True))
    assert offload.parked == []
