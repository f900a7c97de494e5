"""Reading YAML into documents and telling their three shapes apart.

* ``manifest``: a full ``RLTrainingJob`` (apiVersion, kind, metadata, spec);
* ``modelarts``: the ModelArts envelope (``af_output_dir``, ``backend_config``,
  ``engine_kwargs``), nested or written with dotted keys as AscendFactory does;
* ``backend_config``: a bare verl config tree (``data``, ``actor_rollout_ref``, ...);
* ``roll``: a ROLL pipeline config, told by its ``actor_train``/``actor_infer`` workers and
  translated by ``kuberl_api.roll`` (a manifest may carry one as ``spec.roll_config``);
* ``sft``: verl's SFT trainer config, told by its top-level ``model`` without
  ``actor_rollout_ref`` (``backend_config/sft.py``); a ModelArts envelope may carry one as its
  ``backend_config`` (``validation/sft.py``).
"""

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from kuberl_api.backend_config.sft import looks_like_sft
from kuberl_api.job import API_VERSION, KIND
from kuberl_api.validation.problems import Problem, SpecInvalid
from kuberl_api.yamlio import YAMLError, load_yaml_all

_ENVELOPE_KEYS = {"af_output_dir", "backend_config", "engine_kwargs"}
_BACKEND_KEYS = {"data", "actor_rollout_ref", "critic", "reward_model", "algorithm", "trainer"}
_ROLL_KEYS = {"actor_train", "actor_infer"}


class DocumentKind(StrEnum):
    MANIFEST = "manifest"
    MODELARTS = "modelarts"
    BACKEND_CONFIG = "backend_config"
    ROLL = "roll"
    SFT = "sft"


@dataclass(frozen=True)
class Document:
    kind: DocumentKind
    body: dict[str, Any]
    """The spec (manifest, ModelArts), the backend_config tree (bare) or the ROLL config."""
    prefix: str
    """Path of ``body`` inside the file, used in every problem's path."""
    source: str
    metadata: dict[str, Any]


def load_documents(path: str | Path) -> list[Document]:
    """Every document in a YAML file, read as kubectl reads it (``kuberl_api.yamlio``).

    A malformed file raises SpecInvalid naming the line.
    """
    text = Path(path).read_text()
    try:
        raws = [raw for raw in load_yaml_all(text) if raw is not None]
    except YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        reason = getattr(err, "problem", None) or str(err)
        raise SpecInvalid([Problem(where, f"malformed YAML: {reason}", "fix the syntax")]) from err
    if not raws:
        raise SpecInvalid([Problem(str(path), "file holds no YAML document", "add a job spec")])
    return [parse_document(raw, source=f"{path}#{i}") for i, raw in enumerate(raws)]


def parse_document(raw: Any, source: str = "<input>") -> Document:
    if not isinstance(raw, dict):
        raise SpecInvalid([Problem(source, "document must be a mapping", "write key: value pairs")])
    if "apiVersion" in raw or "kind" in raw:
        return _manifest(raw, source)
    raw = expand_dotted_keys(raw)
    if raw.keys() & _ROLL_KEYS:
        return Document(DocumentKind.ROLL, raw, "", source, {})
    if raw.keys() & _ENVELOPE_KEYS:
        if isinstance(raw.get("backend_config"), dict):
            raw = {**raw, "backend_config": expand_dotted_keys(raw["backend_config"])}
        return Document(DocumentKind.MODELARTS, raw, "", source, {})
    if looks_like_sft(raw):
        return Document(DocumentKind.SFT, raw, "", source, {})
    if raw.keys() & _BACKEND_KEYS:
        return Document(DocumentKind.BACKEND_CONFIG, raw, "", source, {})
    raise SpecInvalid(
        [
            Problem(
                source,
                "cannot tell what this document is",
                "write an RLTrainingJob manifest (apiVersion/kind/spec), a ModelArts "
                "config (af_output_dir + backend_config), a verl backend_config, a verl SFT "
                "config (data, model, ...), or a ROLL pipeline config (actor_train, "
                "actor_infer, ...)",
            )
        ]
    )


def _manifest(raw: dict, source: str) -> Document:
    problems = []
    if raw.get("apiVersion") != API_VERSION:
        problems.append(
            Problem(
                "apiVersion", "unsupported apiVersion", f"use {API_VERSION}", raw.get("apiVersion")
            )
        )
    if raw.get("kind") != KIND:
        problems.append(Problem("kind", "unsupported kind", f"use {KIND}", raw.get("kind")))
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        problems.append(Problem("spec", "missing or not a mapping", "add the job spec"))
    if problems:
        raise SpecInvalid(problems)
    if isinstance(spec.get("backend_config"), dict):
        spec = {**spec, "backend_config": expand_dotted_keys(spec["backend_config"])}
    return Document(DocumentKind.MANIFEST, spec, "spec", source, raw.get("metadata") or {})


def expand_dotted_keys(node: dict) -> dict:
    """``{"a.b": 1, "a": {"c": 2}}`` → ``{"a": {"b": 1, "c": 2}}`` (top level only)."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(key, str) and "." in key:
            set_dotted(out, key, value)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


ABSENT = object()
"""What ``lookup_dotted`` returns for a path the tree does not hold (a null is a value)."""


def lookup_dotted(tree: Any, dotted: str) -> Any:
    """``tree[a][b][c]`` for ``"a.b.c"``, or ``ABSENT``."""
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return ABSENT
        node = node[part]
    return node


def same_value(value: Any, other: Any) -> bool:
    """YAML values equal as written: a bool equals only that bool (not 1 or 0)."""
    if isinstance(value, bool) or isinstance(other, bool):
        return value is other
    return bool(value == other)


def set_dotted(tree: dict, dotted: str, value: Any) -> None:
    """Set ``tree[a][b][c] = value`` for ``"a.b.c"``, creating mappings on the way."""
    *parents, leaf = dotted.split(".")
    node = tree
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[leaf] = value
