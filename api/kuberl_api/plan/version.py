"""The plan as a file: its schema version and the digest of the document it was resolved from.

The operator ships a run's plan as JSON (``RunPlan.to_json``/``SFTPlan.to_json``) and the runtime
of the job's image loads it as is. Both ends must be one kuberl release: ``PLAN_VERSION`` names
the plan's schema, and every load (``check_plan_version``, called by each ``from_json``) refuses a
file of another version before reading a field, naming both versions. Bump ``PLAN_VERSION``
whenever a field of ``RunPlan``, ``SFTPlan`` or one of their sections changes meaning, name or
type.

``document_digest`` names the validated document a plan was resolved from: the SHA-256 of its
canonical JSON (``af_output_dir`` and the validated backend_config, or SFT config, with verl's
defaults filled; keys sorted, no spaces). Every attempt of one job spec carries the same digest,
though attempts from the second on resume (``resume_mode: auto``).
"""

import hashlib
import json
from collections.abc import Mapping

PLAN_VERSION = 11
RELEASE_FIX = "use the operator and runtime image of one kuberl release"


class PlanFileError(ValueError):
    """A file given as a plan that this kuberl cannot load as one (a config error: exit 2)."""


def check_plan_version(text: str) -> None:
    """Refuse ``text`` unless it is a plan JSON object of this release's ``PLAN_VERSION``."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise PlanFileError(
            f"not a plan (JSON): {err}; a plan is the JSON file the operator writes under "
            "<af_output_dir>/.kuberl/, to run a config use `kuberl train CONFIG`"
        ) from err
    if not isinstance(raw, dict):
        raise PlanFileError(f"not a plan: a JSON {type(raw).__name__}, expected an object")
    found = raw.get("plan_version")
    if found is None:
        raise PlanFileError(
            f"the plan has no plan_version; this runtime reads plan_version {PLAN_VERSION} "
            f"(a plan from a kuberl release before versioned plans): {RELEASE_FIX}"
        )
    if found != PLAN_VERSION:
        raise PlanFileError(
            f"the plan has plan_version {found!r}, this runtime reads plan_version "
            f"{PLAN_VERSION}: {RELEASE_FIX}"
        )


def document_digest(config: Mapping[str, object], af_output_dir: str | None) -> str:
    """``sha256:<hex>`` of the validated document's canonical JSON."""
    document = {"af_output_dir": af_output_dir or None, "backend_config": dict(config)}
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
