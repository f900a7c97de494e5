"""``build_submission``: the Ray Jobs API payload of one attempt.

The entrypoint is ``kuberl train <file>``; the file is the whole effective config, carried in
the submission's runtime_env and written by the entrypoint itself (no side channel).
"""

import posixpath
import shlex
from typing import Any

import yaml

from kuberl_api.backend_config import BackendConfig
from kuberl_api.validation.deprecations import DEPRECATED_KEYS
from kuberl_operator.builders.common import JobRef
from kuberl_operator.names import submission_id

CONFIG_ENV = "KUBERL_CONFIG_YAML"
CONFIG_DIR = ".kuberl"


def effective_for_attempt(effective: BackendConfig, attempt: int) -> BackendConfig:
    """From the second attempt on, training resumes from the newest complete checkpoint."""
    cfg = effective.model_copy(deep=True)
    if attempt > 1:
        cfg.trainer.resume_mode = "auto"
    return cfg


def render_config(af_output_dir: str, effective: BackendConfig) -> str:
    """Every key of the effective config, except deprecated ones (already converted)."""
    tree = effective.model_dump(mode="json")
    for node_path, key, _ in DEPRECATED_KEYS:
        node = tree
        for part in node_path.split("."):
            node = node.get(part) or {}
        node.pop(key, None)
    document = {"af_output_dir": af_output_dir, "backend_config": tree}
    return yaml.safe_dump(document, sort_keys=False)


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
    effective: BackendConfig,
    attempt: int,
    runtime_kubeconfig: str | None = None,
) -> dict[str, Any]:
    sid = submission_id(job.name, attempt)
    path = config_path(af_output_dir, sid)
    env = {
        CONFIG_ENV: render_config(af_output_dir, effective_for_attempt(effective, attempt)),
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
