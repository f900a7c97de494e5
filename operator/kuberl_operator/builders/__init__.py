"""Pure builders: a job spec in, plain Kubernetes/Ray dicts out. No I/O, no clocks."""

from kuberl_operator.builders.common import JobRef, accelerator_summary
from kuberl_operator.builders.raycluster import build_raycluster
from kuberl_operator.builders.runtime_rbac import build_runtime_rbac
from kuberl_operator.builders.submission import build_submission

__all__ = [
    "JobRef",
    "accelerator_summary",
    "build_raycluster",
    "build_runtime_rbac",
    "build_submission",
]
