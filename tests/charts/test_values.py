"""values.yaml, values.schema.json and the README's table describe the same values, strictly."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import yaml

from support.helm import CHART_DIR, Helm

VALUES_FILE = CHART_DIR / "values.yaml"
SCHEMA = json.loads((CHART_DIR / "values.schema.json").read_text())
VALUES = yaml.safe_load(VALUES_FILE.read_text())


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target: Any = SCHEMA
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return target
    return node


def documented_paths() -> set[str]:
    """Dotted paths of the keys in values.yaml whose comment block opens with `# --`."""
    lines = VALUES_FILE.read_text().splitlines()
    documented: set[str] = set()
    stack: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        match = re.match(r"^(\s*)([A-Za-z][\w-]*):", line)
        if not match:
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        start = number
        while start > 0 and lines[start - 1].strip().startswith("#"):
            start -= 1
        if start < number and lines[start].strip().startswith("# --"):
            documented.add(".".join(k for _, k in stack))
    return documented


DOCUMENTED = documented_paths()


def value_paths(values: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Every documented unit of values.yaml: a `# --` comment on a map documents it whole
    (resources, securityContext); an uncommented map is a group whose keys are documented."""
    for key, value in values.items():
        path = f"{prefix}{key}"
        if path not in DOCUMENTED and isinstance(value, dict) and value:
            yield from value_paths(value, f"{path}.")
        else:
            yield path


def schema_at(path: str) -> dict[str, Any]:
    node = SCHEMA
    for key in path.split("."):
        node = resolve(node)
        assert key in node.get("properties", {}), f"{path}: not in values.schema.json"
        node = node["properties"][key]
    return resolve(node)


def schema_objects(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    node = resolve(node)
    if "properties" in node:
        yield path or "<root>", node
        for key, child in node["properties"].items():
            yield from schema_objects(child, f"{path}.{key}" if path else key)


def test_values_yaml_satisfies_the_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    jsonschema.Draft7Validator(SCHEMA).validate(VALUES)


def test_schema_is_closed_and_described_at_every_level() -> None:
    for path, node in schema_objects(SCHEMA):
        assert node.get("additionalProperties") is False, f"{path}: unknown keys are accepted"
        assert node.get("description"), f"{path}: no description"
        for key, child in node["properties"].items():
            child = resolve(child)
            assert child.get("description"), f"{path}.{key}: no description"
            assert "type" in child or "anyOf" in child, f"{path}.{key}: no type"


def test_schema_and_values_name_the_same_keys() -> None:
    def schema_keys(node: dict[str, Any], prefix: str = "") -> set[str]:
        node = resolve(node)
        keys = set()
        for key, child in node.get("properties", {}).items():
            keys.add(f"{prefix}{key}")
            keys |= schema_keys(child, f"{prefix}{key}.")
        return keys

    def value_keys(values: dict[str, Any], prefix: str = "") -> set[str]:
        keys = set()
        for key, value in values.items():
            keys.add(f"{prefix}{key}")
            if isinstance(value, dict) and schema_at(f"{prefix}{key}").get("properties"):
                keys |= value_keys(value, f"{prefix}{key}.")
        return keys

    in_values = value_keys(VALUES)
    # Optional securityContext fields are schema-only: their defaults are Kubernetes'.
    optional = {
        key
        for key in schema_keys(SCHEMA)
        if key.split(".")[0] in ("podSecurityContext", "securityContext")
    }
    assert schema_keys(SCHEMA) - optional <= in_values, "schema keys missing from values.yaml"
    assert in_values <= schema_keys(SCHEMA), "values.yaml keys missing from the schema"


def test_every_value_is_documented_in_values_yaml() -> None:
    undocumented = [path for path in value_paths(VALUES) if path not in DOCUMENTED]
    assert not undocumented, f"values without a `# --` comment: {undocumented}"


def test_readme_table_lists_every_value() -> None:
    readme = (CHART_DIR / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([\w.]+)` \| `(.*?)` \|", readme, flags=re.MULTILINE))
    assert set(rows) == set(value_paths(VALUES))
    for path, default in rows.items():
        value: Any = VALUES
        for key in path.split("."):
            value = value[key]
        assert json.loads(default) == value, f"README.md: stale default of {path}"


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"replicas": 2}, "replicas"),
        ({"operator": {"watchNamespace": "a"}}, "watchNamespace"),
        ({"metrics": {"serviceMonitor": {"enable": True}}}, "enable"),
        ({"livenessProbe": {"port": "http"}}, "port"),
        ({"operator": {"logFormat": "yaml"}}, "logFormat"),
    ],
)
def test_schema_rejects_unknown_or_mistyped_values(
    helm: Helm, values: dict[str, Any], complaint: str
) -> None:
    result = helm.template_text(values, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert complaint in result.stderr, result.stderr


def test_existing_service_account_must_be_named(helm: Helm) -> None:
    result = helm.template_text({"serviceAccount": {"create": False}}, check=False)
    assert result.returncode != 0
    assert "serviceAccount.name must name an existing ServiceAccount" in result.stderr


def test_service_monitor_needs_the_metrics_service(helm: Helm) -> None:
    values = {"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}}
    result = helm.template_text(values, check=False)
    assert result.returncode != 0
    assert "metrics.serviceMonitor.enabled needs metrics.enabled" in result.stderr
