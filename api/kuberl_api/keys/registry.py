"""The key registry: every key of the job's config tree and its fate, looked up by dotted key.

To register a key, add one line to the section module it belongs to (``keys/data.py``,
``keys/actor.py``, ...) with ``honoured(key, where)``, ``refused(key, fix)`` or
``no_effect(key, reason)`` (see ``keys/entry.py``). ``tests/api/keys`` fails when a schema leaf
is missing here, listed twice, or listed here without being in the schema.
"""

from kuberl_api.keys import (
    actor,
    algorithm,
    critic,
    data,
    model,
    reward,
    rollout,
    trainer,
    verl_keys,
)
from kuberl_api.keys.entry import KeyEntry

_SECTIONS = [data, model, actor, rollout, critic, reward, algorithm, trainer, verl_keys]


def _build() -> dict[str, KeyEntry]:
    table: dict[str, KeyEntry] = {}
    for section in _SECTIONS:
        for entry in section.KEYS:
            assert entry.key not in table, f"{entry.key} is registered twice"
            table[entry.key] = entry
    return table


REGISTRY: dict[str, KeyEntry] = _build()


def entries(prefix: str = "") -> list[KeyEntry]:
    """Registered keys under ``prefix`` (a dotted key or the start of one), in tree order."""
    return [e for key, e in REGISTRY.items() if key.startswith(prefix)]
