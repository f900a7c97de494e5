"""`lr_scheduler_type: wsd` and the torch.optim classes verl 0.9.1 builds: against verl's own
`get_wsd_schedule_with_warmup` and `build_optimizer`."""

from __future__ import annotations

import pytest
import torch
from verl.utils.torch_functional import get_wsd_schedule_with_warmup
from verl.workers.config import FSDPOptimizerConfig
from verl.workers.config.optimizer import build_optimizer as verl_build_optimizer

from kuberl_api.plan.standalone import optim_plan
from kuberl_runtime.engine.optim import build_lr_scheduler, build_optimizer


def _lrs(scheduler: torch.optim.lr_scheduler.LRScheduler, steps: int) -> list[float]:
    values = []
    for _ in range(steps):
        values.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    return values


@pytest.mark.parametrize(
    ("total", "warmup", "min_lr_ratio", "num_cycles"),
    [(100, 10, 0.1, 0.5), (40, 0, 0.0, 0.5), (23, 5, 0.3, 1.0), (7, 7, 0.2, 0.5), (3, 0, 0.5, 0.5)],
)
def test_wsd_equals_verls_schedule_step_by_step(total, warmup, min_lr_ratio, num_cycles):
    settings = {"lr": 0.5, "lr_warmup_steps": warmup, "lr_scheduler_type": "wsd"}
    optim = optim_plan({**settings, "min_lr_ratio": min_lr_ratio, "num_cycles": num_cycles})
    ours = build_lr_scheduler(torch.optim.SGD([torch.zeros(1)], lr=0.5), optim, total)
    theirs = get_wsd_schedule_with_warmup(
        torch.optim.SGD([torch.zeros(1)], lr=0.5),
        num_warmup_steps=warmup,
        num_training_steps=total,
        min_lr_ratio=min_lr_ratio,
        num_cycles=num_cycles,
    )
    steps = total + 3  # past the end: min_lr_ratio
    assert _lrs(ours, steps) == pytest.approx(_lrs(theirs, steps), rel=1e-12, abs=1e-15)


def test_wsd_holds_then_decays():
    optim = optim_plan({"lr": 1.0, "lr_scheduler_type": "wsd", "min_lr_ratio": 0.1})
    lrs = _lrs(build_lr_scheduler(torch.optim.SGD([torch.zeros(1)], lr=1.0), optim, 20), 21)
    # int(0.9 x 20) = 18 stable steps, then a half cosine over the last 2: 1 (its start), 0.55
    assert lrs[:19] == [1.0] * 19
    assert lrs[19] == pytest.approx(0.55)
    assert lrs[20] == pytest.approx(0.1)  # from the last step on: min_lr_ratio


OPTIMIZERS = ["AdamW", "Adam", "Adamax", "NAdam", "RAdam", "SGD", "Adagrad", "Adadelta", "RMSprop"]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_each_accepted_optimizer_is_verls_and_steps_alike(name):
    """Same class and hyper-parameters as verl's build_optimizer, and one step gives the same
    parameters."""
    settings = {"lr": 0.01, "weight_decay": 0.1, "betas": [0.8, 0.95]}
    torch.manual_seed(0)
    ours_model, theirs_model = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    theirs_model.load_state_dict(ours_model.state_dict())
    ours = build_optimizer(ours_model, optim_plan({**settings, "optimizer": name}))
    verl_config = FSDPOptimizerConfig(optimizer=name, lr=0.01, weight_decay=0.1, betas=(0.8, 0.95))
    theirs = verl_build_optimizer(theirs_model.parameters(), verl_config)
    assert type(ours) is type(theirs) is getattr(torch.optim, name)
    for key in ("lr", "weight_decay", "betas"):
        assert ours.defaults.get(key) == pytest.approx(theirs.defaults.get(key))
    batch = torch.randn(5, 4)
    for model, optimizer in ((ours_model, ours), (theirs_model, theirs)):
        model(batch).square().sum().backward()
        optimizer.step()
    for mine, verls in zip(ours_model.parameters(), theirs_model.parameters(), strict=True):
        torch.testing.assert_close(mine, verls, rtol=1e-6, atol=1e-7)
