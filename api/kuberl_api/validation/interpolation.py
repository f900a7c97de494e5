"""``${...}`` interpolations inside a backend_config, resolved by OmegaConf exactly as verl does.

verl's YAMLs are OmegaConf documents: ``${data.max_response_length}`` (absolute from the
backend_config root), ``${.save_contents}`` (relative; each further dot climbs one level),
``${oc.select:key,default}``, ``${oc.decode:...}`` and nested interpolations. kuberl hands the
tree to OmegaConf itself and reports each leaf that does not resolve with its path, the text
and a fix, all at once.

``${oc.env:...}`` reads the environment of whoever resolves the config. In the operator (and
in ``kuberl validate``, which checks what the operator will see) that is the wrong process, so
it is refused unless ``allow_env`` is set (the runtime resolves a job on its own pods).
"""

import re
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, grammar_parser
from omegaconf.errors import GrammarParseError, OmegaConfBaseException

from kuberl_api.validation.interpolation_budget import budget_problems
from kuberl_api.validation.problems import Problem, join_path

_ENV_RESOLVER = re.compile(r"\$\{\s*oc\.env\s*:")


def resolve_interpolations(
    root: dict, prefix: str, *, allow_env: bool = False
) -> tuple[dict, list[Problem]]:
    """The tree with every interpolation resolved, and a problem per leaf that does not."""
    if not _has_interpolation(root):
        return root, []
    over = budget_problems(root)  # OmegaConf keeps no memo: a doubling chain is exponential
    if over:
        return root, [Problem(join_path(prefix, p.path), p.message, p.hint, p.value) for p in over]
    problems: list[Problem] = []
    config = OmegaConf.create(_parseable(root))

    def walk(raw: dict | list, node: Any, where: tuple) -> dict | list:
        if isinstance(raw, dict):
            return {k: leaf(v, node, k, (*where, k)) for k, v in raw.items()}
        return [leaf(v, node, i, (*where, i)) for i, v in enumerate(raw)]

    def leaf(raw: Any, parent: Any, key: Any, where: tuple) -> Any:
        if isinstance(raw, dict | list):
            return walk(raw, parent[key], where)
        if not (isinstance(raw, str) and "${" in raw):
            return raw
        problem = _malformed(raw) or _refused(raw, allow_env) or _resolve(parent, key)
        if isinstance(problem, Problem):
            problems.append(Problem(join_path(prefix, *where), problem.message, problem.hint, raw))
            return raw
        return problem.value

    return walk(root, config, ()), problems


def _parseable(node: Any) -> Any:
    """A copy OmegaConf accepts: malformed interpolations (reported by ``_malformed``) blanked."""
    if isinstance(node, dict):
        return {str(k): _parseable(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_parseable(v) for v in node]
    if isinstance(node, str) and "${" in node and _malformed(node):
        return None
    return node


def _malformed(raw: str) -> Problem | None:
    try:
        grammar_parser.parse(raw)
    except GrammarParseError as err:
        return Problem("", f"malformed interpolation ({err})", "fix the ${...} syntax")
    return None


class _Resolved:
    def __init__(self, value: Any):
        self.value = value


def _refused(raw: str, allow_env: bool) -> Problem | None:
    if allow_env or not _ENV_RESOLVER.search(raw):
        return None
    return Problem(
        "",
        "${oc.env:...} would read the operator's own environment, not the job's",
        "write the value itself, or set it per run with an override (kuberl train FILE key=value)",
    )


def _resolve(parent: Any, key: Any) -> "Problem | _Resolved":
    try:
        value = parent[key]
        if isinstance(value, DictConfig | ListConfig):
            value = OmegaConf.to_container(value, resolve=True)
    except OmegaConfBaseException as err:
        message, hint = _explain(err)
        return Problem("", message, hint)
    return _Resolved(value)


def _explain(err: OmegaConfBaseException) -> tuple[str, str]:
    text = str(err).splitlines()[0]
    kind = type(err).__name__
    if kind == "InterpolationKeyError":
        missing = re.search(r"'([^']+)'", text)
        target = missing.group(1) if missing else "the key"
        return (
            f"interpolation points at a key that is not set ({text})",
            f"set {target}, use ${{oc.select:{target},DEFAULT}}, or write the value directly",
        )
    if "recursi" in text.lower():
        return "interpolation loops back on itself", "break the ${...} cycle"
    if kind == "UnsupportedInterpolationType":
        return (
            f"resolver not known to verl or kuberl ({text})",
            "use ${key.path}, ${oc.select:...}, ${oc.decode:...}, or write the value itself",
        )
    return f"interpolation does not resolve ({text})", "fix the ${...} or write the value itself"


def _has_interpolation(node: Any) -> bool:
    if isinstance(node, dict):
        return any(_has_interpolation(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_interpolation(v) for v in node)
    return isinstance(node, str) and "${" in node
