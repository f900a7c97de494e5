"""The runtime's edge: a job file becomes one frozen run plan.

`load_run_config` reads a bare backend_config, a ModelArts YAML or a full RLTrainingJob manifest,
applies dotted `key=value` overrides to its backend_config, validates it (refused keys are errors)
and builds the `RunPlan` everything below this module reads. A verl SFT config (bare, or as a
ModelArts backend_config) becomes an `SFTPlan` instead (`kuberl_api.plan.sft`).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuberl_api.plan import RunPlan, build_run_plan
from kuberl_api.plan.sft import SFTPlan, build_sft_plan, is_sft_plan_json
from kuberl_api.validation import DocumentKind, SpecInvalid, load_documents, validate_document
from kuberl_api.validation.documents import Document, set_dotted
from kuberl_api.validation.problems import Problem, join_path
from kuberl_api.yamlio import load_yaml
from kuberl_runtime.tracking.external import INSTALL_HINTS, missing_trackers


@dataclass(frozen=True)
class RunConfig:
    """One run: its frozen plan (``kuberl_api.plan``), the only thing the runtime reads."""

    plan: RunPlan | SFTPlan

    @property
    def checkpoint_dir(self) -> Path:
        """`trainer.default_local_dir`, resolved when the plan was built."""
        return Path(self.plan.paths.checkpoint_dir)

    @property
    def output_dir(self) -> Path:
        """af_output_dir, or the checkpoint directory itself when there is none.

        Logs go to `<output_dir>/logs/` and the exported model to `<output_dir>/huggingface/`.
        """
        return Path(self.plan.paths.output_dir)

    def to_json(self) -> str:
        return self.plan.to_json()

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls(SFTPlan.from_json(text) if is_sft_plan_json(text) else RunPlan.from_json(text))


def load_run_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Validate the single job in `path` with `a.b.c=value` overrides on its backend_config.

    `path` "-" reads the YAML from stdin (a launcher can pipe the config in, no file needed).
    """
    if str(path) == "-":
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "stdin.yaml"
            copy.write_text(sys.stdin.read())
            return load_run_config(copy, overrides)
    documents = load_documents(path)
    if len(documents) != 1:
        raise SpecInvalid(
            [Problem(str(path), f"holds {len(documents)} documents", "keep one job per file")]
        )
    doc = apply_overrides(documents[0], overrides)
    result = validate_document(doc, allow_env=True)  # ${oc.env:...} reads this run's env
    result.raise_for_errors()
    if result.sft_config is not None:
        run = RunConfig(build_sft_plan(result.sft_config, result.af_output_dir))
    else:
        assert result.backend_config is not None
        run = RunConfig(build_run_plan(result.backend_config, result.af_output_dir))
    check_trackers_installed(run, doc)
    return run


def check_trackers_installed(run: RunConfig, doc: Document) -> None:
    """wandb / mlflow / swanlab in trainer.logger must be importable where the run trains."""
    bare = doc.kind in (DocumentKind.BACKEND_CONFIG, DocumentKind.SFT)
    where = join_path(doc.prefix, *([] if bare else ["backend_config"]), "trainer", "logger")
    problems = [
        Problem(
            where,
            f"{name} is not installed in this runtime",
            f"{INSTALL_HINTS[name]}, or remove {name} from trainer.logger",
            name,
        )
        for name in missing_trackers(run.plan.trainer.loggers)
    ]
    if problems:
        raise SpecInvalid(problems)


def run_config_from_dict(backend_config: dict[str, Any]) -> RunConfig:
    """A bare backend_config tree (as code builds it: tests, benchmarks), validated and planned."""
    doc = Document(DocumentKind.BACKEND_CONFIG, backend_config, "", "<dict>", {})
    result = validate_document(doc)
    result.raise_for_errors()
    assert result.backend_config is not None
    return RunConfig(build_run_plan(result.backend_config, result.af_output_dir))


def apply_overrides(doc: Document, overrides: list[str] | tuple[str, ...]) -> Document:
    """A copy of `doc` with each `dotted.key=value` (value parsed as YAML) set in backend_config."""
    if not overrides:
        return doc
    body = json.loads(json.dumps(doc.body))
    bare = doc.kind in (DocumentKind.BACKEND_CONFIG, DocumentKind.SFT)
    target = body if bare else body.setdefault("backend_config", {})
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecInvalid(
                [Problem(item, "override is not key=value", "write e.g. trainer.total_epochs=2")]
            )
        set_dotted(target, key.lstrip("+"), load_yaml(value))
    return Document(doc.kind, body, doc.prefix, doc.source, doc.metadata)
