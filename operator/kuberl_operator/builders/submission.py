"""``build_submission``: the Ray Jobs API payload of one attempt.

What an attempt runs is its plan (``kuberl_api.plan``; an SFT job's ``SFTPlan``), resolved here
from the validated job by the function ``kuberl train CONFIG`` uses too
(``kuberl_api.plan.from_document.plan_validated``), with resume switched on from the second
attempt. The submission ships that plan itself: its JSON, with ``plan_version`` and the digest
of the validated document (``kuberl_api.plan.version``), in one env var of the runtime_env. The
entrypoint writes it beside the checkpoints (``<af_output_dir>/.kuberl/<submission>.plan.json``,
an audit trail per attempt) and runs ``kuberl train --plan`` on it: the runtime loads it as is,
never validating or planning it again (``tests/operator/test_submission_plan.py``).
"""

import posixpath
import shlex
from typing import Any

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.plan import RunPlan
from kuberl_api.plan.from_document import plan_validated
from kuberl_api.plan.sft import SFTPlan
from kuberl_api.storage import output_location
from kuberl_operator.builders.common import JobRef
from kuberl_operator.names import submission_id

PLAN_ENV = "KUBERL_PLAN_JSON"
PLAN_DIR = ".kuberl"
STOP_WAIT_SECONDS = 600
"""How long `ray job stop` lets the driver run after its SIGTERM before SIGKILL (Ray's default is
3 s): the ranks finish the step in flight and save a checkpoint at it (runtime
trainer/preemption.py). Read by Ray's job supervisor from the submission's env."""


def plan_for_attempt(
    effective: BackendConfig | SFTConfig, af_output_dir: str, attempt: int
) -> RunPlan | SFTPlan:
    """From the second attempt on, training resumes from the newest complete checkpoint."""
    return plan_validated(effective, af_output_dir, resume=attempt > 1)


def plan_path(af_output_dir: str, submission: str) -> str:
    """Where the attempt's plan lands: beside its checkpoints, an audit trail per attempt."""
    return posixpath.join(output_location(af_output_dir), PLAN_DIR, f"{submission}.plan.json")


def build_entrypoint(path: str) -> str:
    quoted = shlex.quote(path)
    directory = shlex.quote(posixpath.dirname(path))
    return (
        f'mkdir -p {directory} && printf "%s\\n" "${PLAN_ENV}" > {quoted} '
        f"&& exec kuberl train --plan {quoted}"
    )


def build_submission(
    job: JobRef,
    af_output_dir: str,
    effective: BackendConfig | SFTConfig,
    attempt: int,
    runtime_kubeconfig: str | None = None,
    stop_wait_seconds: int = STOP_WAIT_SECONDS,
) -> dict[str, Any]:
    sid = submission_id(job.name, attempt)
    plan = plan_for_attempt(effective, af_output_dir, attempt)
    env = {
        PLAN_ENV: plan.to_json(),
        "KUBERL_JOB_NAME": job.name,
        "KUBERL_JOB_NAMESPACE": job.namespace,
        "KUBERL_JOB_UID": job.uid,  # the af_output_dir owner (runtime checkpoint/owner.py)
        "KUBERL_ATTEMPT": str(attempt),
        "KUBERL_SUBMISSION_ID": sid,
        "RAY_JOB_STOP_WAIT_TIME_S": str(stop_wait_seconds),
    }
    if runtime_kubeconfig:
        env["KUBERL_KUBECONFIG"] = runtime_kubeconfig
    return {
        "entrypoint": build_entrypoint(plan_path(plan.paths.output_dir, sid)),
        "submission_id": sid,
        "runtime_env": {"env_vars": env},
        "metadata": {
            "kuberl.io/job": job.name,
            "kuberl.io/namespace": job.namespace,
            "kuberl.io/uid": job.uid,
            "kuberl.io/attempt": str(attempt),
            "kuberl.io/plan-version": str(plan.plan_version),
            "kuberl.io/source-digest": plan.source_digest,
        },
    }
