"""Who owns an output directory: one job per `af_output_dir`.

Each start removes interrupted checkpoint writes and resumes from the newest step, so two jobs
sharing a directory would delete each other's in-flight checkpoints and resume from each other's.
The first run to start writes `.kuberl-owner` (created exclusively, so two starting together
cannot both win); a run whose owner differs refuses to start, naming the directory and the owner.

The owner is the RLTrainingJob's UID on a cluster (the operator sets KUBERL_JOB_UID on every
submission): every attempt of one job, and only that job, may use the directory. A local run
(`kuberl train`) is `local:<project_name>/<experiment_name>`, so rerunning a config resumes.
An af_output_dir URL is claimed on the store as well (`claim_output_url`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from kuberl_api.storage import strip_protocol
from kuberl_runtime.checkpoint.durable import fsync_path, write_atomically
from kuberl_runtime.checkpoint.remote import open_filesystem, with_retries
from kuberl_runtime.distributed import RankInfo, barrier, broadcast_object

logger = logging.getLogger(__name__)

OWNER_FILE = ".kuberl-owner"
UID_ENV = "KUBERL_JOB_UID"


class OutputDirOwned(RuntimeError):
    """The output directory belongs to another job."""


def run_owner(env: Mapping[str, str], project: str, experiment: str) -> str:
    uid = env.get(UID_ENV)
    if uid:
        job = f"{env.get('KUBERL_JOB_NAMESPACE', '')}/{env.get('KUBERL_JOB_NAME', '')}"
        return f"job:{uid} ({job})"
    return f"local:{project}/{experiment}"


def claim_output_dir(output_dir: Path, owner: str, ranks: RankInfo) -> None:
    """Rank 0 records `owner` when the directory has none; then every rank checks it (so all
    ranks stop together when the directory is someone else's)."""
    if ranks.is_main:
        _create_marker(output_dir, owner)
    barrier()
    recorded = read_owner(output_dir)
    if recorded != owner:
        raise OutputDirOwned(
            f"af_output_dir {output_dir} belongs to {recorded} ({output_dir / OWNER_FILE}), not "
            f"to this run ({owner}): two jobs sharing a directory delete and resume from each "
            "other's checkpoints. Give this job its own af_output_dir (or delete the directory, "
            "or its owner file, once the other job is gone)"
        )


def read_owner(output_dir: Path) -> str | None:
    path = output_dir / OWNER_FILE
    try:
        owner = json.loads(path.read_text()).get("owner")
    except (FileNotFoundError, ValueError, AttributeError):
        return None  # absent, or a claim cut short between its creation and its write
    return owner if isinstance(owner, str) else None


def _create_marker(output_dir: Path, owner: str) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / OWNER_FILE
    text = json.dumps({"owner": owner}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        if read_owner(output_dir) is None:
            write_atomically(path, text)  # an earlier claim died before writing its owner
        return
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    fsync_path(output_dir)
    logger.info("af_output_dir %s now belongs to %s", output_dir, owner)


def claim_output_url(url: str, owner: str, ranks: RankInfo) -> None:
    """``claim_output_dir`` for an af_output_dir URL: the staging directory is the pod's own, so
    the owner is recorded on the store too (``<url>/.kuberl-owner``). Object stores have no
    exclusive create: two jobs starting in the same second may both claim it, the later write
    winning; any later start of the other job is refused."""
    recorded = None
    if ranks.is_main:
        recorded = _claim_remote(url, owner)
    recorded = broadcast_object(recorded)
    if recorded != owner:
        raise OutputDirOwned(
            f"af_output_dir {url} belongs to {recorded} ({url}/{OWNER_FILE}), not to this run "
            f"({owner}): two jobs sharing it would delete and resume from each other's "
            "checkpoints. Give this job its own af_output_dir (or delete that owner file once "
            "the other job is gone)"
        )


def _claim_remote(url: str, owner: str) -> str | None:
    fs = open_filesystem(url)
    path = f"{strip_protocol(url).rstrip('/')}/{OWNER_FILE}"

    def read() -> str | None:
        fs.invalidate_cache()
        try:
            found = json.loads(fs.cat_file(path).decode()).get("owner")
        except FileNotFoundError:
            return None
        except ValueError:
            return None  # a claim cut short: claim it again
        return found if isinstance(found, str) else None

    recorded = with_retries(f"reading {url}/{OWNER_FILE}", read)
    if recorded is None:
        record = (json.dumps({"owner": owner}) + "\n").encode()
        with_retries(f"writing {url}/{OWNER_FILE}", lambda: fs.pipe(path, record))
        logger.info("af_output_dir %s now belongs to %s", url, owner)
        recorded = owner
    return recorded
