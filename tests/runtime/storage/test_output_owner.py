"""An af_output_dir URL is claimed on the store (checkpoint/owner.claim_output_url), against the
real S3 server: the first run records itself, its later attempts pass, another job is refused
naming the URL and its owner."""

from __future__ import annotations

import pytest

from kuberl_runtime.checkpoint.owner import OWNER_FILE, OutputDirOwned, claim_output_url
from support.s3 import s3fs_for
from tests.runtime.storage.test_checkpoint_mirror import ONE_RANK, credentials

pytestmark = pytest.mark.runtime
__all__ = ["credentials"]  # a fixture


def test_the_first_job_owns_the_url_and_another_is_refused(credentials, s3_bucket):
    url = f"s3://{s3_bucket}/runs/grpo"
    claim_output_url(url, "job:uid-a (team/a)", ONE_RANK)
    claim_output_url(url, "job:uid-a (team/a)", ONE_RANK)  # its next attempt
    recorded = s3fs_for(credentials).cat_file(f"{s3_bucket}/runs/grpo/{OWNER_FILE}").decode()
    assert "job:uid-a (team/a)" in recorded
    with pytest.raises(OutputDirOwned, match=f"af_output_dir {url} belongs to job:uid-a"):
        claim_output_url(url, "job:uid-b (team/b)", ONE_RANK)
