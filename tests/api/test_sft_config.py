"""verl 0.9.1's SFT config: told apart by shape, every key with one fate, planned once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import verl

from kuberl_api.keys import Fate
from kuberl_api.keys.sft import SFT_REGISTRY, sft_schema_leaves
from kuberl_api.plan.sft import SFTPlan, build_sft_plan
from kuberl_api.validation import DocumentKind, parse_document, validate_document
from kuberl_api.yamlio import load_yaml
from kuberl_cli.main import main
from support.manifests import valid_sft_manifest, with_changes

ROOT = Path(__file__).resolve().parents[2]
VERL_CONFIG = Path(verl.__file__).parent / "trainer" / "config"


def verl_sft_config() -> dict[str, Any]:
    """sft_trainer_engine.yaml with its Hydra defaults list composed, as verl's main() sees it."""
    root = load_yaml((VERL_CONFIG / "sft_trainer_engine.yaml").read_text())
    for entry in root.pop("defaults"):
        if entry == "_self_":
            continue
        (target,) = entry.keys()
        group, key = target.split("@")
        node = load_yaml((VERL_CONFIG / group / f"{entry[target]}.yaml").read_text())
        root[key] = {**node, **root.get(key, {})}
    return root


def filled(tree: dict[str, Any]) -> dict[str, Any]:
    """The fields verl leaves pointing at ~/data and ~/models, and loggers this venv has."""
    tree["model"]["path"] = "/models/qwen2.5-0.5b"
    tree["data"]["train_files"] = "/data/gsm8k-sft/train.parquet"
    tree["trainer"]["logger"] = ["console", "tensorboard"]
    return tree


def test_verl_own_sft_config_validates():
    doc = parse_document(filled(verl_sft_config()))
    assert doc.kind is DocumentKind.SFT
    result = validate_document(doc)
    assert result.ok, [p.render() for p in result.errors]
    cfg = result.sft_config
    assert cfg is not None and cfg.model.path == "/models/qwen2.5-0.5b"
    # verl's defaults arrive as written: engine, optimizer and the interpolated load_contents.
    assert cfg.optim.lr == 1e-3 and cfg.data.train_batch_size == 256
    assert cfg.checkpoint.load_contents == ["model", "optimizer", "extra"]
    assert "profiler" in result.not_honoured and "data.pad_mode" in result.not_honoured
    plan = build_sft_plan(cfg)
    assert (plan.placement.world_size, plan.placement.device) == (1, "cuda")  # as verl writes
    assert SFTPlan.from_json(plan.to_json()) == plan


def test_a_ppo_config_is_not_taken_for_sft():
    doc = parse_document({"data": {"train_files": "x"}, "actor_rollout_ref": {"model": {}}})
    assert doc.kind is DocumentKind.BACKEND_CONFIG


def _sft(**changes: Any) -> dict[str, Any]:
    tree: dict[str, Any] = {
        "data": {"train_files": "/d/train.parquet", "train_batch_size": 8},
        "model": {"path": "/m"},
        "trainer": {"nnodes": 1, "n_gpus_per_node": 2, "logger": "console"},
    }
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = tree
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return tree


@pytest.mark.parametrize(
    ("key", "value", "path"),
    [
        ("data__tools_key", "functions", "data.tools_key"),
        ("trainer__default_hdfs_dir", "ftp://x/y", "trainer.default_hdfs_dir"),
        ("model__enable_activation_offload", True, "model.enable_activation_offload"),
        ("model__use_liger", True, "model.use_liger"),
        ("trainer__logger", ["console", "neptune"], "trainer.logger"),
    ],
)
def test_keys_kuberl_does_not_implement_are_refused_by_path(key, value, path):
    result = validate_document(parse_document(_sft(**{key: value})))
    assert {p.path for p in result.errors} == {path}, [p.render() for p in result.errors]
    assert result.errors[0].hint


def test_unknown_keys_name_the_path_and_the_closest_key():
    result = validate_document(parse_document(_sft(data__max_lenght=512)))
    (problem,) = result.errors
    assert problem.path == "data.max_lenght" and "max_length" in problem.render()


def test_the_global_batch_must_split_over_the_ranks():
    result = validate_document(parse_document(_sft(data__train_batch_size=7)))
    assert [p.path for p in result.errors] == ["data.train_batch_size"]


def test_a_modelarts_envelope_carries_an_sft_config():
    doc = parse_document({"af_output_dir": "/out", "backend_config": _sft()})
    result = validate_document(doc)
    assert result.ok, [p.render() for p in result.errors]
    plan = build_sft_plan(result.sft_config, result.af_output_dir)
    assert plan.paths.checkpoint_dir == "/out/checkpoints"
    assert plan.paths.hf_export_dir == "/out/huggingface"


def _manifest(**changes: Any) -> dict[str, Any]:
    return with_changes(valid_sft_manifest(), changes)


def test_an_rltrainingjob_carries_an_sft_config_in_spec_sft_config():
    result = validate_document(parse_document(_manifest()))
    assert result.ok, [p.render() for p in result.errors]
    cfg = result.sft_config
    assert cfg is not None and result.spec is not None and result.spec.sft_config is cfg
    assert result.effective_config is cfg and result.spec.training_config_key == "sft_config"
    # Placement follows the worker pool (one node of 4 GPUs), as for an RL job.
    trainer = cfg.trainer
    assert (trainer.nnodes, trainer.n_gpus_per_node, trainer.device) == (1, 4, "cuda")
    plan = build_sft_plan(cfg, result.af_output_dir)
    assert plan.paths.checkpoint_dir == "/mnt/af/t/checkpoints"
    assert plan.paths.hf_export_dir == "/mnt/af/t/huggingface"


def test_a_cpu_pool_places_an_sft_job_on_cpu():
    pools = [{"name": "cpu", "nodes": 2, "cpu": "2", "memory": "4Gi"}]
    result = validate_document(parse_document(_manifest(**{"spec.workerPools": pools})))
    assert result.ok, [p.render() for p in result.errors]
    trainer = result.sft_config.trainer
    assert (trainer.nnodes, trainer.n_gpus_per_node, trainer.device) == (2, 1, "cpu")


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        # the SFT tree's own problems carry the spec's path
        ({"spec.sft_config.data.max_lenght": 512}, "spec.sft_config.data.max_lenght", "max_length"),
        ({"spec.sft_config.data.tools_key": "f"}, "spec.sft_config.data.tools_key", "remove"),
        ({"spec.sft_config.data.train_batch_size": 6}, "spec.sft_config.data.train_batch_size",
         "multiple of the 4 ranks"),
        ({"spec.sft_config.trainer.n_gpus_per_node": 8},
         "spec.sft_config.trainer.n_gpus_per_node", "set it to 4"),
        ({"spec.sft_config.trainer.default_local_dir": "/elsewhere"},
         "spec.sft_config.trainer.default_local_dir", "under /mnt/af/t"),
        ({"spec.engine_kwargs": {"vllm": {"x": 1}}}, "spec.engine_kwargs", "remove it"),
        ({"spec.workerPools": []}, "spec.workerPools", ""),
        ({"spec.sft_config": "data: x"}, "spec.sft_config", "data, model"),
        ({"spec.roll_config": {"actor_train": {}}}, "spec.sft_config", "remove roll_config"),
    ],
)  # fmt: skip
def test_sft_job_problems_name_the_field_and_the_fix(changes, path, words):
    errors = validate_document(parse_document(_manifest(**changes))).errors
    assert [p.path for p in errors] == [path], [p.render() for p in errors]
    assert words in errors[0].render()


def test_an_sft_tree_under_backend_config_points_at_sft_config():
    manifest = valid_sft_manifest()
    manifest["spec"]["backend_config"] = manifest["spec"].pop("sft_config")
    (problem,) = validate_document(parse_document(manifest)).errors
    assert problem.path == "spec.backend_config" and "spec.sft_config" in problem.message
    assert problem.hint == "rename backend_config to sft_config"


def test_a_spec_without_a_training_config_says_which_ones_exist():
    manifest = valid_sft_manifest()
    del manifest["spec"]["sft_config"]
    (problem,) = validate_document(parse_document(manifest)).errors
    assert (problem.path, problem.message) == ("spec.backend_config", "required key is missing")
    assert "sft_config" in problem.hint


def test_the_crd_types_sft_config_and_wants_exactly_one_training_config():
    crd = load_yaml((ROOT / "crds" / "rltrainingjobs.kuberl.io.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    sft = spec["properties"]["sft_config"]
    assert {"data", "model", "engine", "optim", "checkpoint", "trainer"} <= set(sft["properties"])
    assert "messages_key" in sft["properties"]["data"]["properties"]
    assert not {"backend_config", "sft_config"} & set(spec["required"])
    rules = [v["rule"] for v in spec["x-kubernetes-validations"]]
    assert any("has(self.sft_config)" in rule and "exists_one" in rule for rule in rules)


def test_every_sft_leaf_has_exactly_one_fate():
    assert set(SFT_REGISTRY) == set(sft_schema_leaves())


@pytest.mark.parametrize(
    "entry", [e for e in SFT_REGISTRY.values() if e.fate is Fate.HONOURED], ids=lambda e: e.key
)
def test_an_honoured_sft_key_names_a_module_that_exists(entry):
    """``where`` is what `kuberl keys --sft` shows a reader; that the key is read at all is proven
    by tests/api/keys/test_honoured_changes_sft_plan.py (setting it changes the SFTPlan)."""
    assert (ROOT / entry.where).is_file(), f"{entry.key}: {entry.where} does not exist"


def test_kuberl_keys_sft_lists_the_sft_registry(capsys):
    assert main(["keys", "--sft", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(SFT_REGISTRY)
    by_key = {r["key"]: r for r in rows}
    assert by_key["data.max_length"]["fate"] == "honoured"
    assert by_key["data.max_length"]["default"] == 1024
    assert by_key["trainer.default_hdfs_dir"]["fate"] == "honoured"  # the checkpoint mirror
    assert by_key["data.tools_key"]["fate"] == "refused"
    assert main(["keys", "--sft", "data.tools"]) == 0
    assert "data.tools_key" in capsys.readouterr().out
