"""``build_submission``: the Ray Jobs API payload of one attempt.

What an attempt runs is decided by its run plan (``kuberl_api.plan``; an SFT job's
``SFTPlan``): the operator builds it from the validated job, with resume switched on from the
second attempt. The entrypoint is ``kuberl train <file>``; the file is the plan's source, the
effective config as a ModelArts envelope (``af_output_dir`` + ``backend_config``, which holds
the SFT tree for an SFT job: ``kuberl train`` tells it by its shape), carried in the
submission's runtime_env and written by the entrypoint itself (no side channel). The runtime
validates it again and builds the same plan (``tests/operator/test_submission_plan.py``).
"""

import copy
import posixpath
import shlex
from typing import Any

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.plan import RunPlan, build_run_plan
from kuberl_api.plan.sft import SFTPlan, build_sft_plan
from kuberl_api.validation.deprecations import DEPRECATED_KEYS
from kuberl_api.yamlio import dump_yaml
from kuberl_operator.builders.common import JobRef
from kuberl_operator.names import submission_id

CONFIG_ENV = "KUBERL_CONFIG_YAML"
CONFIG_DIR = ".kuberl"


def plan_for_attempt(
    effective: BackendConfig | SFTConfig, af_output_dir: str, attempt: int
) -> RunPlan | SFTPlan:
    """From the second attempt on, training resumes from the newest complete checkpoint."""
    cfg = effective.model_copy(deep=True)
    if attempt > 1:
        cfg.trainer.resume_mode = "auto"
    if isinstance(cfg, SFTConfig):
        return build_sft_plan(cfg, af_output_dir)
    return build_run_plan(cfg, af_output_dir)


def render_config(plan: RunPlan | SFTPlan) -> str:
    """The plan's source, every key of the effective config, except deprecated ones (already
    converted)."""
    tree = copy.deepcopy(plan.source)
    for node_path, key, _ in DEPRECATED_KEYS if isinstance(plan, RunPlan) else ():
        node = tree
        for part in node_path.split("."):
            node = node.get(part) or {}
        node.pop(key, None)
    document = {"af_output_dir": plan.paths.output_dir, "backend_config": tree}
    return dump_yaml(document)  # kuberl_api.yamlio: reads back as written


def config_path(af_output_dir: str, submission: str) -> str:
    """Where the attempt's config lands: beside its checkpoints, an audit trail per attempt."""
    return posixpath.join(af_output_dir, CONFIG_DIR, f"{submission}.yaml")


def build_entrypoint(path: str) -> str:
    quoted = shlex.quote(path)
    directory = shlex.quote(posixpath.dirname(path))
    return (
        f'mkdir -p {directory} && printf "%s\\n" "${CONFIG_ENV}" > {quoted} '
        f"&& exec kuberl train {quoted}"
    )


def build_submission(
    job: JobRef,
    af_output_dir: str,
    effective: BackendConfig | SFTConfig,
    attempt: int,
    runtime_kubeconfig: str | None = None,
) -> dict[str, Any]:
    sid = submission_id(job.name, attempt)
    plan = plan_for_attempt(effective, af_output_dir, attempt)
    path = config_path(plan.paths.output_dir, sid)
    env = {
        CONFIG_ENV: render_config(plan),
        "KUBERL_JOB_NAME": job.name,
        "KUBERL_JOB_NAMESPACE": job.namespace,
        "KUBERL_ATTEMPT": str(attempt),
        "KUBERL_SUBMISSION_ID": sid,
    }
    if runtime_kubeconfig:
        env["KUBERL_KUBECONFIG"] = runtime_kubeconfig
    return {
        "entrypoint": build_entrypoint(path),
        "submission_id": sid,
        "runtime_env": {"env_vars": env},
        "metadata": {
            "kuberl.io/job": job.name,
            "kuberl.io/namespace": job.namespace,
            "kuberl.io/uid": job.uid,
            "kuberl.io/attempt": str(attempt),
        },
    }
