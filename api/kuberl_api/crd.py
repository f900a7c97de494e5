"""Generate the RLTrainingJob CustomResourceDefinition from the pydantic models.

The OpenAPI schema the API server wants is *structural*: every node typed, no ``$ref``,
no ``anyOf`` of different types, ``nullable`` instead of null unions. This module rewrites
pydantic's JSON schema into that shape; CEL rules come from the models' ``json_schema_extra``.
"""

import copy
import re
from typing import Any

import yaml

from kuberl_api.job import (
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAME,
    VERSION,
    RLTrainingJobSpec,
    RLTrainingJobStatus,
)
from kuberl_api.validation.boolean_keys import alias_of, boolean_key_paths

PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Step", "type": "integer", "jsonPath": ".status.progress.globalStep"},
    {
        "name": "Progress",
        "type": "integer",
        "jsonPath": ".status.progress.percent",
        "description": "Percent of total training steps done",
    },
    {"name": "Restarts", "type": "integer", "jsonPath": ".status.restarts"},
    {"name": "Checkpoint", "type": "integer", "jsonPath": ".status.checkpoint.latestStep"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Accelerators", "type": "string", "jsonPath": ".status.accelerators", "priority": 1},
    {"name": "Cluster", "type": "string", "jsonPath": ".status.rayCluster.name", "priority": 1},
    {
        "name": "Submission",
        "type": "string",
        "jsonPath": ".status.rayJob.submissionId",
        "priority": 1,
    },
    {
        "name": "ETA",
        "type": "integer",
        "jsonPath": ".status.progress.estimatedRemainingSeconds",
        "priority": 1,
    },
    {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
]


# Every object a job owns is named and labelled from metadata.name: RayClusters and their
# Services (DNS-1035 labels; kuberl shortens `<name>-a<N>` with a hash to fit KubeRay's own
# suffixes) and the `kuberl.io/job` label (at most 63 characters). A name KubeRay would reject
# is refused when the job is applied, not left Provisioning forever.
NAME_RULE = {
    "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && "
    "size(self.metadata.name) <= 63",
    "message": "metadata.name must be a DNS-1035 label of at most 63 characters: lowercase "
    "letters, digits and '-', starting with a letter and ending with a letter or digit",
    "reason": "FieldValueInvalid",
}


def build_crd() -> dict[str, Any]:
    spec_schema = structural_schema(RLTrainingJobSpec.model_json_schema(by_alias=True))
    spec_schema["properties"]["workerPools"].update(
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
    )
    # backend_config, roll_config (a ROLL config kuberl translates) or sft_config (an SFT job):
    # the CEL rule on the spec requires exactly one of them, the others left out (not null).
    for key in ("backend_config", "sft_config"):
        spec_schema["properties"][key].pop("nullable")
    _declare_boolean_key_aliases(spec_schema["properties"]["backend_config"])
    status_schema = structural_schema(RLTrainingJobStatus.model_json_schema(by_alias=True))
    status_schema["properties"]["conditions"].update(
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": [SHORT_NAME],
                "categories": ["all", "kuberl"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A reinforcement-learning fine-tuning job "
                            "(PPO/GRPO, verl-compatible) run on a KubeRay RayCluster.",
                            "required": ["spec"],
                            "x-kubernetes-validations": [NAME_RULE],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


def _declare_boolean_key_aliases(backend_schema: dict[str, Any]) -> None:
    """``rollout.n`` written unquoted reaches the API server as ``"false"``: accept that spelling.

    The alias property has the key's schema; a CEL rule refuses both spellings at once. The
    validation edge renames the alias back (``kuberl_api.validation.boolean_keys``).
    """
    for *parents, key in boolean_key_paths():
        node = backend_schema
        for parent in parents:
            node = node["properties"][parent]
        alias = alias_of(key)
        node["properties"][alias] = {
            **node["properties"][key],
            "description": f"{key}, as kubectl sends an unquoted `{key}:` (YAML 1.1 reads it "
            f"as {alias}); kuberl reads it as {key}.",
        }
        node.setdefault("x-kubernetes-validations", []).append(
            {
                # CEL escapes property names that are keywords: `false` is `__false__`.
                "rule": f"!(has(self.{key}) && has(self.__{alias}__))",
                "message": f"{key} is set twice: once as {key!r} and once unquoted (kubectl "
                f"reads an unquoted {key}: as {alias!r}); keep one",
            }
        )


def render_crd() -> str:
    header = "# Generated by `make crds` from the pydantic models in api/kuberl_api. Do not edit.\n"
    return header + yaml.dump(build_crd(), Dumper=_Yaml11SafeDumper, sort_keys=False, width=100)


class _Yaml11SafeDumper(yaml.SafeDumper):
    """Quotes every string a YAML 1.1 reader takes for a boolean.

    kubectl and helm parse YAML 1.1, where a bare ``n`` (verl's ``rollout.n``) or ``on`` is a
    boolean; PyYAML leaves them bare, so the CRD would declare a field called ``false``.
    """


_Yaml11SafeDumper.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:y|Y|n|N|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF)$"),
    list("yYnNoO"),
)


def structural_schema(schema: dict[str, Any]) -> dict[str, Any]:
    definitions = schema.get("$defs", {})
    return _convert(schema, definitions)


def _convert(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    node = copy.deepcopy(node)
    if "$ref" in node:
        target = defs[node.pop("$ref").split("/")[-1]]
        node = {**copy.deepcopy(target), **node}
    nullable = False
    if "anyOf" in node:
        members = node.pop("anyOf")
        non_null = [m for m in members if m.get("type") != "null"]
        nullable = len(non_null) < len(members)
        # The members are converted already; converting them twice would corrupt their bounds.
        out = {**_merge_union(non_null, defs), **_convert_plain(_annotations(node), defs)}
    else:
        out = _convert_plain(node, defs)
    if nullable and "x-kubernetes-preserve-unknown-fields" not in out:
        out["nullable"] = True
    return out


def _merge_union(members: list[dict[str, Any]], defs: dict[str, Any]) -> dict[str, Any]:
    if len(members) == 1:
        return _convert(members[0], defs)
    types = {m.get("type") for m in members}
    if types == {"integer", "string"}:
        return {"x-kubernetes-int-or-string": True}
    # e.g. "a file or a list of files": the server keeps it, kuberl validates it.
    return {"x-kubernetes-preserve-unknown-fields": True}


_ANNOTATIONS = ("description", "default", "x-kubernetes-validations")


def _annotations(node: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k in _ANNOTATIONS}


def _convert_plain(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in (
        "type",
        "description",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "required",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
        "format",
    ):
        if key in node:
            out[key] = node[key]
    if "const" in node:
        out["enum"] = [node["const"]]
    for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node:
            out[plain], out[bound] = node[bound], True
    if "default" in node and node["default"] not in (None, {}, []):
        text = out.get("description", "")
        out["description"] = f"{text} Default: {_render_default(node['default'])}.".strip()
    if "enum" in out and "type" not in out:
        out["type"] = _json_type(out["enum"][0])
    if "properties" in node:
        out["type"] = "object"
        out["properties"] = {k: _convert(v, defs) for k, v in node["properties"].items()}
    elif out.get("type") == "object":
        values = node.get("additionalProperties", True)
        if isinstance(values, dict) and values:
            out["additionalProperties"] = _convert(values, defs)
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
    if "items" in node:
        out["items"] = _convert(node["items"], defs)
    if out.get("format") not in ("int32", "int64", "date-time", None):
        out.pop("format")
    return out


def _render_default(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"
