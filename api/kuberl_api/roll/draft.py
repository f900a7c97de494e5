"""The backend_config being built from a ROLL config, with the problems found on the way.

Every verl key set remembers the ROLL key it came from, so a problem found later by verl's own
rules can name the key the user actually wrote.
"""

from dataclasses import dataclass, field
from typing import Any

from kuberl_api.validation.documents import set_dotted
from kuberl_api.validation.problems import Problem, Severity, join_path

_UNSET = object()


@dataclass
class Draft:
    prefix: str
    """Where the ROLL config sits in its file (``""`` bare, ``spec.roll_config`` in a manifest)."""
    tree: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    """verl dotted path -> ROLL dotted path (with prefix)."""

    def path(self, *roll_keys: str | int) -> str:
        return join_path(self.prefix, *roll_keys)

    def set(self, verl_key: str, value: Any, *roll_keys: str | int) -> None:
        set_dotted(self.tree, verl_key, value)
        if roll_keys:
            self.origins[verl_key] = self.path(*roll_keys)

    def get(self, verl_key: str, default: Any = None) -> Any:
        node: Any = self.tree
        for key in verl_key.split("."):
            if not isinstance(node, dict) or key not in node:
                return default
            node = node[key]
        return node

    def warn(self, roll_keys: tuple, message: str, hint: str, value: Any = _UNSET) -> None:
        self._add(roll_keys, message, hint, value, Severity.WARNING)

    def error(self, roll_keys: tuple, message: str, hint: str, value: Any = _UNSET) -> None:
        self._add(roll_keys, message, hint, value, Severity.ERROR)

    def _add(self, roll_keys: tuple, message: str, hint: str, value: Any, severity: Severity):
        extra = {} if value is _UNSET else {"value": value}
        self.problems.append(
            Problem(self.path(*roll_keys), message, hint, severity=severity, **extra)
        )
