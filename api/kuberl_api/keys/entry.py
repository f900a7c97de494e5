"""One row of the key registry: a key of the verl tree and its fate in kuberl.

Every leaf of ``backend_config`` (and of the ModelArts envelope around it) has exactly one
fate, and nothing else exists:

* ``honoured``  — the runtime or operator reads it; ``where`` names the module that reads it
  (a path under the repository root, e.g. ``runtime/kuberl_runtime/engine/actor.py``).
  ``accepts`` optionally narrows the honoured values (``reward_manager``: naive, batch, dapo);
  any other value is refused with ``fix``.
* ``refused``   — kuberl does not implement it: verl's default (``allowed``; by default the
  schema's default, and null) is accepted, any other value is an error naming key, value and
  ``fix`` (what to do instead).
* ``no_effect`` — accepted by nature (profilers, dump dirs, Hydra ``_target_``), reported once as
  "accepted, no effect in kuberl" with ``reason``.

Key paths are dotted and relative to ``backend_config`` (``data.image_key``); envelope keys
start with ``envelope.`` (``envelope.af_output_dir``). A key with sub-keys that are free-form
(a ``dict`` field such as ``override_config``) is one leaf.
"""

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

ENVELOPE = "envelope."
_SCHEMA_DEFAULT: Any = object()


class Fate(StrEnum):
    HONOURED = "honoured"
    REFUSED = "refused"
    NO_EFFECT = "no-effect"


@dataclass(frozen=True)
class KeyEntry:
    key: str
    fate: Fate
    where: str = ""
    """Honoured: the module (repository-relative path) that reads the key."""
    fix: str = ""
    """Refused: what the user should do instead (also for values outside ``accepts``)."""
    reason: str = ""
    """No effect: why the key cannot matter in kuberl."""
    allowed: tuple[Any, ...] | Any = _SCHEMA_DEFAULT
    """Refused: values accepted (verl's default); the schema's default unless given."""
    accepts: tuple[Any, ...] = ()
    """Honoured: when non-empty, the only values honoured (list values: every item)."""
    same_as: str = ""
    """Refused: a key whose value is also accepted here (verl's ``${that.key}`` default)."""
    as_default: tuple[Any, ...] = ()
    """No effect: values that ask for nothing kuberl does not do anyway (``strategy: fsdp2``);
    like verl's default they are counted, not listed as not honoured."""

    @property
    def has_schema_default(self) -> bool:
        return self.allowed is _SCHEMA_DEFAULT


def honoured(key: str, where: str, *, accepts: tuple[Any, ...] = (), fix: str = "") -> KeyEntry:
    assert where, f"{key}: an honoured key names the module that reads it"
    assert not accepts or fix, f"{key}: say what to do with a value outside accepts"
    return KeyEntry(key, Fate.HONOURED, where=where, accepts=accepts, fix=fix)


def refused(
    key: str, fix: str, *, allowed: tuple[Any, ...] | Any = _SCHEMA_DEFAULT, same_as: str = ""
) -> KeyEntry:
    assert fix, f"{key}: a refused key says what to do instead"
    return KeyEntry(key, Fate.REFUSED, fix=fix, allowed=allowed, same_as=same_as)


def no_effect(key: str, reason: str, *, as_default: tuple[Any, ...] = ()) -> KeyEntry:
    assert reason, f"{key}: a no-effect key says why"
    return KeyEntry(key, Fate.NO_EFFECT, reason=reason, as_default=as_default)
