"""verl 0.9.1's own defaults for the keys kuberl accepts without effect, and its Hydra class names.

A copy of the wheel's ``_generated_ppo_trainer.yaml`` (values as written there, interpolations
included) in ``verl_defaults.json``, so that kuberl reports only the no-effect keys a user changed
without depending on verl at run time. Regenerate with
``.venv/bin/python tests/api/keys/test_verl_defaults.py``; that test fails when it is stale.
"""

import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

DATA = "verl_defaults.json"


@dataclass(frozen=True)
class VerlDefaults:
    values: dict[str, Any]
    """Dotted no-effect key -> verl's default (a subtree stays a dict)."""
    targets: dict[str, str]
    """Dotted path of each ``_target_`` in verl's config -> its class name."""


@cache
def verl_defaults() -> VerlDefaults:
    data = json.loads(files("kuberl_api.keys").joinpath(DATA).read_text())
    return VerlDefaults(values=data["values"], targets=data["targets"])
