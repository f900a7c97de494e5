"""kuberl reads YAML as kubectl does: unit expectations, and a table checked with real kubectl."""

import json
import subprocess
from typing import Any

import pytest
import yaml

from kuberl_api.yamlio import dump_yaml, load_yaml, load_yaml_all

# Plain scalars where PyYAML's YAML 1.1 and Go's (kubectl) disagree, or that users write in verl
# configs. The kubectl test below sends each through the real kubectl.
SCALARS = [
    "1e-6",
    "1E6",
    ".5",
    "-.5",
    "+1",
    "1.",
    "1.e3",
    "1e3",
    "1_000",
    "0x1F",
    "0o17",
    "017",
    "0b101",
    "08",
    "00",
    "-0",
    "0.",
    "3.",
    "1.5e+3",
    "1.5E-3",
    "12e03",
    "0x_1f",
    "1_0.5",
    "-1_000",
    "5e-7",
    "2.0",
    "inf",
    "nan",
    "y",
    "Y",
    "n",
    "N",
    "yes",
    "Yes",
    "YES",
    "no",
    "No",
    "NO",
    "on",
    "On",
    "ON",
    "off",
    "Off",
    "OFF",
    "true",
    "True",
    "TRUE",
    "false",
    "False",
    "FALSE",
    "tRUE",
    "null",
    "Null",
    "NULL",
    "~",
    "",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "1:20",
    "190:20:30",
    "1,000",
    "1e",
    "e3",
    "=",
    "'1e-6'",
    '"n"',
    "!!str 5",
    "!!float 1",
    "[1e-6, n, .5]",
    "{n: 1}",
    "fsdp",
    "bf16",
    "0.5",
    "-1",
]
KEYS = ["n", "y", "yes", "No", "on", "OFF", "true", "1", "1.5", "1e3", "0x10", "'n'", "val_kwargs"]


def _document() -> str:
    lines = ["apiVersion: example.io/v1", "kind: Probe", "metadata: {name: probe}", "spec:"]
    lines += [f"  v{i:03d}: {text}" for i, text in enumerate(SCALARS)]
    lines += ["  keys:"] + [f"    - {key}: {i}" for i, key in enumerate(KEYS)]
    return "\n".join(lines) + "\n"


def _typed(value: Any) -> Any:
    """Compare as the API server would: JSON types, numbers by value."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("number", float(value))
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return {k: _typed(v) for k, v in value.items()}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lr: 1e-6", {"lr": 1e-6}),
        ("lr: 1E6", {"lr": 1000000}),
        ("x: .5", {"x": 0.5}),
        ("x: 1_000", {"x": 1000}),
        ("x: 017", {"x": 15}),
        ("x: 08", {"x": 8}),
        ("x: 2.0", {"x": 2}),
        ("x: n", {"x": False}),
        ("x: Y", {"x": True}),
        ("x: off", {"x": False}),
        ("x: tRUE", {"x": "tRUE"}),
        ("x: 2001-12-14", {"x": "2001-12-14"}),
        ("x: inf", {"x": "inf"}),
        ("rollout: {n: 5}", {"rollout": {"false": 5}}),
        ("'n': 5", {"n": 5}),
        ("1: a", {"1": "a"}),
        ("yes: 1", {"true": 1}),
        ("a: &x {b: 1}\nc: {<<: *x, d: 2}", {"a": {"b": 1}, "c": {"b": 1, "d": 2}}),
    ],
)
def test_reads_scalars_as_kubectl(text: str, expected: Any) -> None:
    assert _typed(load_yaml(text)) == _typed(expected)


@pytest.mark.parametrize("text", ["x: .inf", "x: -.Inf", "x: .nan", "~: 1", "null: 1"])
def test_refuses_what_kubectl_refuses(text: str) -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml(text)


def test_reads_every_document() -> None:
    assert load_yaml_all("a: 1\n---\n---\nb: n\n") == [{"a": 1}, None, {"b": False}]


@pytest.mark.cluster
def test_same_values_as_real_kubectl(cluster_binaries: Any, tmp_path: Any) -> None:
    manifest = tmp_path / "probe.yaml"
    manifest.write_text(_document())
    # `annotate --local` runs kubectl's own manifest reader without an API server.
    out = subprocess.run(
        [
            str(cluster_binaries.kubectl),
            "annotate",
            "--local",
            "-f",
            str(manifest),
            "-o",
            "json",
            "probe=1",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    theirs = json.loads(out)["spec"]
    ours = load_yaml(_document())["spec"]
    for i, text in enumerate(SCALARS):
        key = f"v{i:03d}"
        assert _typed(ours[key]) == _typed(theirs[key]), f"{text!r}"
    assert _typed(ours["keys"]) == _typed(theirs["keys"])


def test_dump_reads_back_the_same() -> None:
    data = {
        "n": 4,
        "y": {"N": "n", "on": "yes"},
        "lr": "1e-6",
        "day": "2001-12-14",
        "octal": "017",
        "values": [1e-6, 0.5, True, None, "tRUE", "1_000", ".5"],
    }
    text = dump_yaml(data)
    assert load_yaml(text) == data
    assert _typed(load_yaml(text)) == _typed(data)
