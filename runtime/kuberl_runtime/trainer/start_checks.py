"""The model-dependent start refusals, in the driver, before any rank starts.

Validation judges the models whose config.json it can read (``kuberl_api/plan/model_rules.py``).
What it could not read, a model at a remote URL (``s3://``, ``gs://``, ...) that the ranks'
initializer has not fetched yet, the driver reads here: only the URL's config.json, so the same
rules refuse the job before a rank allocates. A hub id that is not in the local hub cache is
read by the ranks themselves; its refusals come from the component build
(``trainer/components.py``), with the same keys.
"""

from __future__ import annotations

import json
import logging
import posixpath

from kuberl_api.plan import RunPlan
from kuberl_api.plan.model_files import CONFIG_FILE, ModelFacts, local_model_facts, model_facts
from kuberl_api.plan.model_rules import ModelRefusal, ModelUse, model_refusals
from kuberl_api.plan.sft import SFTPlan
from kuberl_api.storage import is_url, scheme_of, strip_protocol
from kuberl_runtime.checkpoint.remote import open_filesystem

logger = logging.getLogger(__name__)


def start_refusals(plan: RunPlan | SFTPlan) -> list[ModelRefusal]:
    """The refusals the plan's models call for (an SFT plan has no such rules)."""
    if not isinstance(plan, RunPlan):
        return []
    return model_refusals(ModelUse.of_plan(plan), driver_model_facts)


def driver_model_facts(path: str) -> ModelFacts | None:
    """The model's facts from what the driver can read: a local or cached config.json, else a
    remote URL's config.json; None when neither is there (the ranks then judge it)."""
    facts = local_model_facts(path)
    if facts is not None or not is_url(path) or scheme_of(path) == "file":
        return facts
    url = posixpath.join(path.rstrip("/"), CONFIG_FILE)
    try:
        text = open_filesystem(path).cat_file(strip_protocol(url))
        config = json.loads(text)
    except (OSError, ValueError) as err:
        logger.warning("start checks: cannot read %s (%s); the ranks will judge it", url, err)
        return None
    return model_facts(config, url) if isinstance(config, dict) else None
