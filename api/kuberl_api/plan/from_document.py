"""A job document becomes its plan: the one path from YAML to ``RunPlan``/``SFTPlan``.

``plan_validated`` is the resolver both planes call: the operator for each attempt's submission
(``kuberl_operator.builders.submission``, resume from attempt 2) and ``kuberl train CONFIG`` /
``kuberl plan`` through ``plan_job_file`` (validation, then the same function). A plan file
(``kuberl train --plan``) is never resolved again: the runtime loads it as is.

``${oc.env:...}`` is read only where ``allow_env`` says so: ``kuberl train CONFIG`` on the
machine that trains. The operator (and ``kuberl validate``) refuses it, so a shipped plan never
depends on the operator's environment (``validation/interpolation.py``).
"""

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.plan.build import build_run_plan
from kuberl_api.plan.run_plan import RunPlan
from kuberl_api.plan.sft import SFTPlan, build_sft_plan, is_sft_plan_json
from kuberl_api.plan.version import check_plan_version, document_digest
from kuberl_api.validation import (
    Document,
    DocumentKind,
    Problem,
    SpecInvalid,
    load_documents,
    validate_document,
)
from kuberl_api.validation.documents import set_dotted
from kuberl_api.validation.problems import join_path
from kuberl_api.yamlio import load_yaml

_BARE = (DocumentKind.BACKEND_CONFIG, DocumentKind.SFT)


@dataclass(frozen=True)
class PlannedJob:
    plan: RunPlan | SFTPlan
    config_path: str
    """Where the backend_config (or SFT config) sits in the file: "" for a bare config,
    "spec.backend_config" in a manifest; problems found later name keys under it."""


def plan_validated(
    config: BackendConfig | SFTConfig, af_output_dir: str | None, *, resume: bool = False
) -> RunPlan | SFTPlan:
    """The plan of a validated config; ``resume`` switches on ``resume_mode: auto`` (an
    operator's attempt from the second on). The digest names ``config`` as validated."""
    digest = document_digest(json.loads(config.model_dump_json()), af_output_dir)
    if resume:
        config = config.model_copy(deep=True)
        config.trainer.resume_mode = "auto"
    if isinstance(config, SFTConfig):
        plan: RunPlan | SFTPlan = build_sft_plan(config, af_output_dir)
    else:
        plan = build_run_plan(config, af_output_dir)
    return plan.model_copy(update={"source_digest": digest})


def load_plan_json(text: str) -> RunPlan | SFTPlan:
    """A plan's JSON as is (``kuberl train --plan``), refused unless of this release's
    ``plan_version`` (``PlanFileError``)."""
    check_plan_version(text)
    return SFTPlan.from_json(text) if is_sft_plan_json(text) else RunPlan.from_json(text)


def plan_document(doc: Document, *, allow_env: bool = False) -> PlannedJob:
    """Validate ``doc`` (every error raised at once as ``SpecInvalid``) and plan it."""
    result = validate_document(doc, allow_env=allow_env)
    result.raise_for_errors()
    config = result.effective_config
    assert config is not None, "a valid document has a config"
    where = doc.prefix if doc.kind in _BARE else join_path(doc.prefix, "backend_config")
    return PlannedJob(plan_validated(config, result.af_output_dir), where)


def plan_job_file(
    path: str | Path, overrides: list[str] | tuple[str, ...] = (), *, allow_env: bool = False
) -> PlannedJob:
    """The one job in ``path`` ("-": stdin) with ``a.b.c=value`` overrides, planned."""
    if str(path) == "-":
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "stdin.yaml"
            copy.write_text(sys.stdin.read())
            return plan_job_file(copy, overrides, allow_env=allow_env)
    documents = load_documents(path)
    if len(documents) != 1:
        raise SpecInvalid(
            [Problem(str(path), f"holds {len(documents)} documents", "keep one job per file")]
        )
    return plan_document(apply_overrides(documents[0], overrides), allow_env=allow_env)


def plan_tree(backend_config: dict[str, object]) -> RunPlan:
    """A bare backend_config tree (as code builds it: tests, benchmarks), validated and planned."""
    doc = Document(DocumentKind.BACKEND_CONFIG, backend_config, "", "<dict>", {})
    plan = plan_document(doc).plan
    assert isinstance(plan, RunPlan), "a backend_config plans an RL run"
    return plan


def apply_overrides(doc: Document, overrides: list[str] | tuple[str, ...]) -> Document:
    """A copy of `doc` with each `dotted.key=value` (value parsed as YAML) set in backend_config."""
    if not overrides:
        return doc
    body = json.loads(json.dumps(doc.body))
    target = body if doc.kind in _BARE else body.setdefault("backend_config", {})
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecInvalid(
                [Problem(item, "override is not key=value", "write e.g. trainer.total_epochs=2")]
            )
        set_dotted(target, key.lstrip("+"), load_yaml(value))
    return Document(doc.kind, body, doc.prefix, doc.source, doc.metadata)
