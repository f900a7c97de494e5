"""What each submission tells the runtime for data safety: whose af_output_dir it is (the job's
UID, checked against runtime/kuberl_runtime/checkpoint/owner.py's marker), and how long
`ray job stop` waits for the checkpoint the driver's SIGTERM asks for."""

from __future__ import annotations

from kuberl_api.validation import parse_document, validate_document
from kuberl_operator.builders import build_submission
from kuberl_operator.builders.common import JobRef
from kuberl_operator.builders.submission import STOP_WAIT_SECONDS
from kuberl_runtime.checkpoint.owner import UID_ENV, run_owner
from support.manifests import valid_manifest


def test_the_submission_names_the_owner_and_waits_for_the_stop_checkpoint():
    result = validate_document(parse_document(valid_manifest()))
    assert result.ok
    job = JobRef(name="grpo", namespace="team-a", uid="0f7c-uid")
    payload = build_submission(job, result.af_output_dir, result.effective_config, 2)
    env = payload["runtime_env"]["env_vars"]
    assert env[UID_ENV] == "0f7c-uid"
    assert run_owner(env, "p", "e") == "job:0f7c-uid (team-a/grpo)"
    # Ray's default (3 s) would SIGKILL the driver before any step could finish.
    assert int(env["RAY_JOB_STOP_WAIT_TIME_S"]) == STOP_WAIT_SECONDS >= 300
