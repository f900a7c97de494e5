"""A tiny trained actor for checkpoint tests: an ``nn.Linear(4, 3)`` and its AdamW after one step.

Seeded: two calls with one seed give equal weights and optimizer state, two seeds differ. The
checkpoint tests wrap it in their ``TrainState`` with the extra and data state each checks; a
test's subprocess (a rank of a 2-process run) imports it as well as pytest does.
"""

from __future__ import annotations

import torch
from torch import nn


def tiny_actor(seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The model and its optimizer after one AdamW step on a random batch (``seed``'s draws)."""
    torch.manual_seed(seed)
    model = nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    return model, optimizer
