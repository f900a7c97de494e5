"""Object-storage credentials for the ranks: the Secret named in spec.storage.credentials.

The worker containers (where the ranks run as Ray actors) get the Secret's keys as environment
variables through ``envFrom``, plus the Secret's *name* (never a value) so an access error can
name it. The head container, whose driver's environment Ray may print, gets neither; the values
never pass through the operator: Kubernetes resolves the reference in the kubelet.
"""

from __future__ import annotations

from typing import Any

from kuberl_api.job import RLTrainingJobSpec
from kuberl_api.storage import CREDENTIALS_SECRET_ENV


def add_storage_credentials(container: dict[str, Any], spec: RLTrainingJobSpec) -> None:
    """Give a rank container the credentials Secret, when the job names one."""
    credentials = spec.storage.credentials
    if credentials is None:
        return
    name = credentials.secret_ref.name
    container.setdefault("envFrom", []).append({"secretRef": {"name": name}})
    container.setdefault("env", []).append({"name": CREDENTIALS_SECRET_ENV, "value": name})
