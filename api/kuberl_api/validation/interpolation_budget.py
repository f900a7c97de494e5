"""A budget for ``${...}`` resolution, checked before OmegaConf resolves anything.

OmegaConf resolves an interpolation each time it is read and keeps no memo, so a chain of
self-doubling interpolations (``b: ${a}${a}``, ``c: ${b}${b}``, ...) a few KiB long costs time
and memory exponential in its length. This pass walks the same references once per node
(memoised) and over-estimates, for every interpolated leaf, the length of its resolved text,
the number of lookups OmegaConf would make and the length of its reference chain. A leaf over
any limit is refused naming the limit, and nothing is resolved.

The estimate is deliberately generous: every ``key.path`` token inside a ``${...}`` that names
an existing node counts as read, whatever resolver it sits in (``oc.select``, ``oc.decode``).
"""

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kuberl_api.validation.problems import Problem

MAX_RESOLVED_CHARS = 64 * 1024
"""Longest text one interpolated value may resolve to (a verl value is a few dozen chars)."""
MAX_LOOKUPS = 5_000
"""Most lookups the resolution of one value may take (verl's own YAMLs need a handful)."""
MAX_TOTAL_LOOKUPS = 20_000
"""Most lookups resolving the whole tree may take (each costs OmegaConf ~0.2 ms: ~4 s)."""
MAX_CHAIN = 32
"""Longest chain of interpolations pointing at interpolations (verl's YAMLs: 3)."""
MAX_NAMED = 3
"""Leaves over budget named one by one; the rest are counted."""
MAX_WALK = 400
"""Deepest the estimate walks (containers and references together) before refusing."""

_OPEN = re.compile(r"\$\{\s*")
_KEY = re.compile(r"(\.*)((?:[A-Za-z_][\w-]*|\d+)(?:\.(?:[A-Za-z_][\w-]*|\d+)|\[\d+\])*)")
_SEGMENT = re.compile(r"[A-Za-z_][\w-]*|\d+")

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Cost:
    chars: int
    lookups: int
    chain: int


class _Overflow(Exception):
    def __init__(self, limit: str):
        self.limit = limit


def budget_problems(root: dict) -> list[Problem]:
    """One problem per interpolated leaf whose resolution would go over a limit."""
    estimator = _Estimator(root)
    problems = []
    total = 0
    for path, raw in _leaves(root, ()):
        if not (isinstance(raw, str) and "${" in raw):
            continue
        try:
            total += estimator.cost(path).lookups
            if total > MAX_TOTAL_LOOKUPS:
                raise _Overflow(
                    f"resolving every interpolation would take more than {MAX_TOTAL_LOOKUPS} "
                    "lookups (limit MAX_TOTAL_LOOKUPS)"
                )
        except _Overflow as over:
            problems.append(Problem(path_text(path), over.limit, _HINT, raw))
    if len(problems) > MAX_NAMED:  # one refusal per leaf of a long chain says nothing more
        rest = len(problems) - MAX_NAMED
        problems = [*problems[:MAX_NAMED], Problem(problems[MAX_NAMED].path, f"and {rest} more")]
    return problems


_HINT = "write the value itself, or break the chain of ${...} that repeats other interpolations"


def path_text(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


class _Estimator:
    def __init__(self, root: dict) -> None:
        self.root = root
        self.memo: dict[Path, Cost] = {}
        self.visiting: set[Path] = set()

    def cost(self, path: Path, chain: int = 0, depth: int = 0) -> Cost:
        if path in self.memo:
            return self.memo[path]
        if path in self.visiting:  # a cycle: OmegaConf reports it, cheaply
            return Cost(0, 1, 0)
        if chain > MAX_CHAIN:
            raise _Overflow(_chain_message(chain))
        if depth > MAX_WALK:
            raise _Overflow(f"interpolations nest more than {MAX_WALK} levels (limit MAX_WALK)")
        self.visiting.add(path)
        try:
            found = self._cost(path, _node(self.root, path), chain, depth + 1)
        finally:
            self.visiting.discard(path)
        _check(found)
        self.memo[path] = found
        return found

    def _cost(self, path: Path, node: Any, chain: int, depth: int) -> Cost:
        if isinstance(node, dict | list):
            items = node.items() if isinstance(node, dict) else enumerate(node)
            parts = [self.cost((*path, key), chain, depth) for key, _ in items]
            chars = 2 + sum(p.chars + 4 for p in parts) + len(json.dumps(list(_keys(node))))
            return _total(parts, chars, extra_chain=0)
        if isinstance(node, str) and "${" not in node:
            return Cost(len(node), 1, 0)
        if not isinstance(node, str):
            return Cost(len(json.dumps(node, default=str)), 1, 0)
        targets = _references(self.root, path, node)
        parts = [self.cost(target, chain + 1, depth) for target in targets]
        return _total(parts, _literal_chars(node), extra_chain=1)


def _total(parts: list[Cost], chars: int, extra_chain: int) -> Cost:
    return Cost(
        chars + sum(p.chars for p in parts if extra_chain),
        1 + sum(p.lookups for p in parts),
        max((p.chain for p in parts), default=0) + extra_chain,
    )


def _check(cost: Cost) -> None:
    if cost.chars > MAX_RESOLVED_CHARS:
        raise _Overflow(
            f"interpolations would resolve to more than {MAX_RESOLVED_CHARS} characters "
            f"(limit MAX_RESOLVED_CHARS, estimated {cost.chars})"
        )
    if cost.lookups > MAX_LOOKUPS:
        raise _Overflow(
            f"interpolations would take more than {MAX_LOOKUPS} lookups to resolve "
            f"(limit MAX_LOOKUPS, estimated {cost.lookups})"
        )
    if cost.chain > MAX_CHAIN:
        raise _Overflow(_chain_message(cost.chain))


def _chain_message(found: int) -> str:
    return (
        f"a chain of more than {MAX_CHAIN} interpolations pointing at interpolations "
        f"(limit MAX_CHAIN, found {found}+)"
    )


def _references(root: dict, path: Path, text: str) -> Iterator[Path]:
    """Every existing node a ``key.path`` token inside a ``${...}`` of ``text`` may name."""
    for opening in _OPEN.finditer(text):
        for match in _KEY.finditer(text, opening.end(), _close(text, opening.end())):
            target = _target(path, match.group(1), match.group(2))
            if target is not None and _exists(root, target):
                yield target


def _literal_chars(text: str) -> int:
    """The length of ``text`` outside its outermost ``${...}`` (each is replaced by a value)."""
    literal, index = 0, 0
    while (opening := text.find("${", index)) >= 0:
        literal += opening - index
        index = _close(text, opening + 2) + 1
    return literal + max(len(text) - index, 0)


def _close(text: str, start: int) -> int:
    depth = 1
    for index in range(start, len(text)):
        if text.startswith("${", index):
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return len(text)


def _target(path: Path, dots: str, key: str) -> Path | None:
    segments: list[str | int] = [
        int(s) if s.isdigit() else s for s in _SEGMENT.findall(key.replace("[", ".["))
    ]
    if not dots:
        return tuple(segments)
    base = path[: len(path) - len(dots)]  # one dot: the leaf's parent; each more climbs one
    return (*base, *segments) if len(dots) <= len(path) else None


def _exists(root: Any, path: Path) -> bool:
    return _node(root, path, missing=_ABSENT) is not _ABSENT


_ABSENT = object()


def _node(root: Any, path: Path, missing: Any = None) -> Any:
    node = root
    for part in path:
        if isinstance(node, dict) and str(part) in node:
            node = node[str(part)]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return missing
    return node


def _keys(node: dict | list) -> Iterator[str]:
    return iter(node) if isinstance(node, dict) else iter(())


def _leaves(node: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    stack = [(path, node)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(((*where, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*where, i), v) for i, v in enumerate(value))
        else:
            yield where, value
