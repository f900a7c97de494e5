"""YAML read the way ``kubectl apply`` reads it (Go's YAML 1.1, then JSON).

kuberl reads every YAML it is given (job manifests, ModelArts and ROLL configs, bare verl
trees, ``key=value`` overrides) with this module, so a file means the same to ``kuberl
validate``, the operator (which receives what kubectl sent) and the runtime. PyYAML's own
YAML 1.1 resolver differs from Go's (sigs.k8s.io/yaml over go-yaml) in ways users hit:

* ``1e-6``, ``1E6``, ``.5``, ``1.`` are numbers for kubectl, strings (or a string) for PyYAML;
* ``1_000``, ``0x_1f``, ``0o17``, ``0b101``, ``017`` are integers for kubectl;
* ``y``/``n``/``Y``/``N`` are booleans for kubectl (PyYAML: strings); ``tRUE`` is a string;
* dates (``2001-12-14``) stay strings for kubectl (PyYAML: ``datetime``);
* ``.inf``/``.nan`` and null mapping keys are errors for kubectl (JSON cannot carry them);
* mapping keys become strings: ``n: 5`` arrives as ``{"false": 5}``, ``1: x`` as ``{"1": x}``;
* floats with no fraction arrive as integers (``1.0`` → ``1``, ``1E6`` → ``1000000``).

``tests/api/test_yamlio.py`` compares this module with the real kubectl on a table of scalars.
"""

import math
import re
from typing import Any

import yaml

__all__ = ["BOOLEAN_WORDS", "YAMLError", "dump_yaml", "load_yaml", "load_yaml_all"]

YAMLError = yaml.YAMLError

BOOLEAN_WORDS = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"], True),
    **dict.fromkeys(["on", "On", "ON"], True),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "false", "False", "FALSE"], False),
    **dict.fromkeys(["off", "Off", "OFF"], False),
}
"""Plain scalars Go's YAML 1.1 reads as booleans (as values, and as mapping keys)."""

_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile("^(?:" + "|".join(BOOLEAN_WORDS) + ")$")
# Go: strconv.ParseInt(s without "_", 0, 64), else ParseFloat when the text is float-shaped.
_INT = re.compile(r"^[-+]?(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|[0-9][0-9_]*)$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?$")
_SPECIAL_FLOAT = re.compile(r"^[-+]?\.(?:inf|Inf|INF|nan|NaN|NAN)$")
_MAX_INT = 2**63


class _KubectlLoader(yaml.SafeLoader):
    """SafeLoader with Go's implicit scalar rules instead of PyYAML's."""


_KubectlLoader.yaml_implicit_resolvers = {}
_FIRST = "-+0123456789._~nNyYtTfFoO"
for _tag, _pattern in [
    ("tag:yaml.org,2002:null", _NULL),
    ("tag:yaml.org,2002:bool", _BOOL),
    ("tag:yaml.org,2002:int", _INT),
    ("tag:yaml.org,2002:float", _FLOAT),
    ("tag:yaml.org,2002:float", _SPECIAL_FLOAT),
]:
    _KubectlLoader.add_implicit_resolver(_tag, _pattern, [*_FIRST, ""])
_KubectlLoader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^<<$"), ["<"])


def _construct_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    return BOOLEAN_WORDS[loader.construct_scalar(node)]


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | float:
    text = str(loader.construct_scalar(node)).replace("_", "")
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+"))
    lowered = digits.lower()
    try:
        if lowered.startswith(("0x", "0o", "0b")):
            value = int(digits, 0)
        elif len(digits) > 1 and digits.startswith("0"):
            value = int(digits, 8)  # Go's base-0 ParseInt: a leading 0 means octal
        else:
            value = int(digits)
    except ValueError:
        return _construct_float(loader, node)  # "08": not octal, Go falls back to a float
    return _json_number(float(sign * value)) if abs(value) >= _MAX_INT else sign * value


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | float:
    text = str(loader.construct_scalar(node)).replace("_", "")
    if _SPECIAL_FLOAT.match(text):
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"{text} cannot be sent to the API server (JSON has no inf/nan)",
            node.start_mark,
        )
    return _json_number(float(text))


def _json_number(value: float) -> int | float:
    """Whole floats arrive at the API server as integers (sigs.k8s.io/yaml does this)."""
    if math.isfinite(value) and value.is_integer() and abs(value) < _MAX_INT:
        return int(value)
    return value


def _key_text(key: Any, node: yaml.Node) -> str:
    if isinstance(key, str):
        return key
    if key is None:
        raise yaml.constructor.ConstructorError(
            None, None, "a mapping key is null (kubectl refuses it); quote it", node.start_mark
        )
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float):
        return repr(key) if isinstance(key, float) else str(key)
    raise yaml.constructor.ConstructorError(
        None, None, f"a mapping key must be a scalar, not {type(key).__name__}", node.start_mark
    )


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[str, Any]:
    loader.flatten_mapping(node)
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        out[_key_text(key, key_node)] = loader.construct_object(value_node, deep=True)
    return out


def _construct_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_KubectlLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
_KubectlLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_KubectlLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_KubectlLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_KubectlLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_text)


def load_yaml(text: str) -> Any:
    """One YAML document as kubectl would send it to the API server."""
    return yaml.load(text, Loader=_KubectlLoader)


def load_yaml_all(text: str) -> list[Any]:
    """Every YAML document in ``text`` (empty documents included as None)."""
    return list(yaml.load_all(text, Loader=_KubectlLoader))


class _KubectlDumper(yaml.SafeDumper):
    """Quotes every string that kubectl (and ``load_yaml``) would read as something else."""


_KubectlDumper.yaml_implicit_resolvers = {
    first: list(resolvers) for first, resolvers in _KubectlLoader.yaml_implicit_resolvers.items()
}


def dump_yaml(data: Any) -> str:
    """YAML that ``load_yaml`` (and kubectl) reads back as ``data``: ``"n"`` stays a string key."""
    return yaml.dump(data, Dumper=_KubectlDumper, sort_keys=False, allow_unicode=True)
