"""One registry of every config key kuberl accepts, each with one fate.

``honoured`` (read by the runtime or operator), ``refused`` (any value but verl's default is an
error) or ``no_effect`` (accepted by nature, reported once). See ``keys/entry.py`` for the format
and ``keys/registry.py`` for how to add a key.
"""

from kuberl_api.keys.check import MESSAGE, KeyReport, RefusedValue, check_key_fates
from kuberl_api.keys.entry import ENVELOPE, Fate, KeyEntry, honoured, no_effect, refused
from kuberl_api.keys.leaves import schema_leaves
from kuberl_api.keys.registry import REGISTRY, entries

__all__ = [
    "ENVELOPE",
    "MESSAGE",
    "REGISTRY",
    "Fate",
    "KeyEntry",
    "KeyReport",
    "RefusedValue",
    "check_key_fates",
    "entries",
    "honoured",
    "no_effect",
    "refused",
    "schema_leaves",
]
