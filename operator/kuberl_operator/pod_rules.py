"""What the API server would refuse in the pods KubeRay makes for a job, refused at validation.

KubeRay creates the pods; when the API server refuses one (HTTP 422) KubeRay retries it forever
and the job would sit Provisioning with no reason. So the spec values that end up in a pod are
checked here as Kubernetes checks them:

* env names: ``[-._a-zA-Z][-._a-zA-Z0-9]*``, not ``.``/``..`` nor starting ``..`` (the rule
  every supported Kubernetes version applies);
* quantities (cpu, memory, sharedMemory): Kubernetes' quantity syntax (``4Gi``, ``500m``,
  ``1e3``; ``4GB`` is not one) and never negative;
* mount paths: ``af_output_dir`` and the model volume's ``mountPath`` may not be a path the pod
  mounts itself (``/tmp``, ``/dev/shm``), one of their parents, or each other.
"""

import posixpath
import re
from decimal import Decimal, InvalidOperation

from kuberl_api.job import RLTrainingJobSpec
from kuberl_api.platform import Quantity
from kuberl_api.storage import output_location
from kuberl_api.validation.problems import Problem
from kuberl_operator.builders.pods import WRITABLE_DIR

ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_SUFFIXES = frozenset(
    {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"}
)
_EXPONENT = re.compile(r"^[eE][-+]?[0-9]+$")
POD_OWN_PATHS = (WRITABLE_DIR, "/dev/shm")
QUANTITY_HINT = "write a Kubernetes quantity: 8, 500m, 32Gi, 4G (not 4GB), never negative"


def pod_problems(spec: RLTrainingJobSpec) -> list[Problem]:
    return _env_problems(spec) + _quantity_problems(spec) + _mount_problems(spec)


def env_name_error(name: str) -> str | None:
    """Why the API server would refuse ``name`` as an env name; None when it would not."""
    if not ENV_NAME.match(name):
        return (
            "is not a valid environment variable name (letters, digits, '-', '.' and '_', "
            "not starting with a digit; no '=' or spaces)"
        )
    if name in (".", "..") or name.startswith(".."):
        return "may not be '.' or '..' nor start with '..'"
    return None


def _env_problems(spec: RLTrainingJobSpec) -> list[Problem]:
    problems = []
    for index, var in enumerate(spec.env):
        error = env_name_error(var.name)
        if error is not None:
            problems.append(
                Problem(
                    f"spec.env[{index}].name",
                    error + ": the API server would refuse every pod of the job",
                    "rename it, e.g. MY_SETTING or my.setting",
                    var.name,
                )
            )
    return problems


def quantity_error(value: Quantity) -> str | None:
    """Why the API server would refuse ``value`` as a resource quantity; None when it would not."""
    if isinstance(value, bool):
        return "is not a quantity"
    if isinstance(value, int):
        return "is negative" if value < 0 else None
    match = _QUANTITY.match(value.strip()) if value == value.strip() else None
    if match is None:
        return "is not a Kubernetes quantity"
    number, suffix = match.groups()
    if suffix not in _SUFFIXES and not _EXPONENT.match(suffix):
        return f"has the unit {suffix!r}, which Kubernetes does not know"
    try:
        parsed = Decimal(number)
    except InvalidOperation:
        return "is not a Kubernetes quantity"
    if number.count(".") > 1 or not any(c.isdigit() for c in number):
        return "is not a Kubernetes quantity"
    return "is negative" if parsed < 0 else None


def _quantity_problems(spec: RLTrainingJobSpec) -> list[Problem]:
    fields: list[tuple[str, Quantity | None]] = [
        ("spec.head.cpu", spec.head.cpu),
        ("spec.head.memory", spec.head.memory),
    ]
    for index, pool in enumerate(spec.worker_pools):
        where = f"spec.workerPools[{index}]"
        fields += [
            (f"{where}.cpu", pool.cpu),
            (f"{where}.memory", pool.memory),
            (f"{where}.sharedMemory", pool.shared_memory),
        ]
    problems = []
    for path, value in fields:
        error = quantity_error(value) if value is not None else None
        if error is not None:
            problems.append(Problem(path, error, QUANTITY_HINT, value))
    return problems


def _collides(path: str, own: str) -> bool:
    """``path`` mounted over ``own`` or one of its parents hides or duplicates the pod's mount."""
    path, own = posixpath.normpath(path), posixpath.normpath(own)
    return own == path or own.startswith(path.rstrip("/") + "/")


def _mount_problems(spec: RLTrainingJobSpec) -> list[Problem]:
    mounts = []
    if spec.storage.output and (spec.storage.output.claim_name or spec.storage.output.host_path):
        mounts.append(("spec.af_output_dir", output_location(spec.af_output_dir)))
    if spec.storage.model and (spec.storage.model.claim_name or spec.storage.model.host_path):
        mounts.append(("spec.storage.model.mountPath", spec.storage.model.mount_path))
    problems = []
    for path, value in mounts:
        hit = next((own for own in POD_OWN_PATHS if _collides(value, own)), None)
        if hit is not None:
            problems.append(
                Problem(
                    path,
                    f"would be mounted over the pod's own {hit} (Ray's scratch space, HOME, "
                    "shared memory), which the API server or the pod cannot have twice",
                    "choose a directory of its own, e.g. /mnt/output or /models",
                    value,
                )
            )
    if len(mounts) == 2 and posixpath.normpath(mounts[0][1]) == posixpath.normpath(mounts[1][1]):
        problems.append(
            Problem(
                "spec.storage.model.mountPath",
                "is af_output_dir: two volumes cannot be mounted at one path",
                "mount the model volume elsewhere, e.g. /models",
                mounts[1][1],
            )
        )
    return problems
