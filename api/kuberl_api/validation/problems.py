"""One problem found in a spec: where, what was there, what is wrong, what to do."""

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

_MISSING = object()


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    hint: str = ""
    value: Any = _MISSING
    severity: Severity = Severity.ERROR

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def render(self) -> str:
        text = f"{self.path}: {self.message}"
        if self.value is not _MISSING:
            text += f" (got {_short_repr(self.value)})"
        if self.hint:
            text += f" — {self.hint}"
        return text


class SpecInvalid(ValueError):
    """A spec with at least one error; ``problems`` holds all of them."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(p.render() for p in problems))


def join_path(prefix: str, *parts: str | int) -> str:
    path = prefix
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
