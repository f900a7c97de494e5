"""Name → function registries, so users can add estimators and losses the config selects by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

F = TypeVar("F", bound=Callable[..., object])


class UnknownAlgorithmError(ValueError):
    """A config names an estimator or loss that no one registered."""

    def __init__(self, kind: str, name: str, known: tuple[str, ...]) -> None:
        self.kind = kind
        self.name = name
        self.known = known
        super().__init__(
            f"unknown {kind} {name!r}; known: {', '.join(known)}. "
            f"Register your own with the {kind} registry's decorator before building the trainer."
        )


class Registry(Generic[F]):
    """A name → function table: `register` is a decorator, `get` fails naming the known ones."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, F] = {}

    def register(self, *names: str) -> Callable[[F], F]:
        """Register the decorated function under one or more names (aliases such as k1/kl)."""
        if not names:
            raise ValueError(f"register a {self.kind} under at least one name")

        def decorate(fn: F) -> F:
            for name in names:
                existing = self._entries.get(name)
                # Re-registering the same function (module reload) is harmless; a different one
                # silently replacing a built-in would change training without anyone noticing.
                if existing is not None and existing is not fn:
                    raise ValueError(f"{self.kind} {name!r} is already registered to {existing!r}")
                self._entries[name] = fn
            return fn

        return decorate

    def get(self, name: str) -> F:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownAlgorithmError(self.kind, name, self.names()) from None

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        return name in self._entries
