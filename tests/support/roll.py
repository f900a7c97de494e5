"""Helpers: set a dotted ROLL key, translate and validate, read a verl key."""

import copy
from typing import Any

from kuberl_api.validation import parse_document, validate_document
from kuberl_api.validation.documents import set_dotted

DELETE = object()


def with_keys(base: dict, changes: dict[str, Any]) -> dict:
    raw = copy.deepcopy(base)
    for dotted, value in changes.items():
        if value is DELETE:
            *parents, leaf = dotted.split(".")
            node = raw
            for key in parents:
                node = node[key]
            node.pop(leaf, None)
        else:
            set_dotted(raw, dotted, value)
    return raw


def validate(raw: dict):
    return validate_document(parse_document(raw))


def verl(result, dotted: str) -> Any:
    node: Any = result.backend_config
    for key in dotted.split("."):
        node = node[key] if isinstance(node, dict) else getattr(node, key)
    return node
