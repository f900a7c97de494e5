"""Bounds on the shape of a spec, checked before anything walks it recursively.

The CRD leaves several subtrees free-form (``x-kubernetes-preserve-unknown-fields``: parts of
``backend_config``, ``affinity``, ``tolerations``, ...). CEL has no recursion, so the API server
cannot bound how deep such a subtree nests; it admits up to its own JSON limit (10,000 levels).
Python's recursive walkers (``json``, ``copy.deepcopy``, pydantic) fail far earlier, so:

* ``shape_problems`` refuses a spec nested deeper than ``MAX_DEPTH`` or with more than
  ``MAX_NODES`` values, walking it without recursion, naming the deepest path and the limit;
* ``allow_api_server_depth`` lets this process's recursive walkers (kopf's watch stream decodes
  every object with ``json.loads``) get through anything the API server admits, so one such
  object cannot stop the watch for every other job.
"""

import logging
import sys
from typing import Any

from kuberl_api.validation.problems import Problem, join_path

log = logging.getLogger(__name__)

MAX_DEPTH = 48
"""Deepest nesting below ``spec`` (verl's deepest key and a full pod affinity: about 12)."""
MAX_NODES = 100_000
"""Most values (mappings, lists and scalars together) in one spec."""
API_SERVER_MAX_DEPTH = 10_000
"""kube-apiserver's JSON decoder refuses deeper objects."""
RECURSION_LIMIT = 4 * API_SERVER_MAX_DEPTH
"""Interpreter frames allowed: room for json, deepcopy (3 frames a level) and a handler."""


def shape_problems(spec: Any, prefix: str = "spec") -> list[Problem]:
    """One problem when ``spec`` nests too deep or holds too many values; none otherwise."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), spec)]
    nodes = 0
    while stack:
        where, value = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return [
                Problem(
                    prefix,
                    f"holds more than {MAX_NODES} values (limit MAX_NODES)",
                    "keep data out of the spec: reference files (data.train_files) instead",
                )
            ]
        if len(where) > MAX_DEPTH:
            return [
                Problem(
                    join_path(prefix, *where[:MAX_DEPTH]),
                    f"nests more than {MAX_DEPTH} levels below {prefix} (limit MAX_DEPTH)",
                    "flatten it: no Kubernetes or verl field nests this deep",
                )
            ]
        if isinstance(value, dict):
            stack.extend(((*where, str(k)), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*where, i), v) for i, v in enumerate(value))
    return []


def allow_api_server_depth() -> None:
    """Raise the interpreter's recursion limit so an object at the API server's own depth limit
    decodes (measured: json.loads + deepcopy + json.dumps of 10,001 levels fit an 8 MiB thread
    stack at this limit; at the default 1,000 json.loads raises RecursionError at ~1,000)."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
        log.debug("recursion limit raised to %d", RECURSION_LIMIT)
