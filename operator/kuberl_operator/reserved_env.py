"""Environment names a job may not set: the operator, KubeRay or Ray's token lock own them.

KubeRay adds ``RAY_AUTH_MODE``/``RAY_AUTH_TOKEN`` to a container only when absent, so a job's own
``RAY_AUTH_MODE=disabled`` would switch its head's lock off; ``RAY_ADDRESS`` would point the
driver at another cluster; ``KUBERL_*`` are what the operator tells the runtime. (``HOME`` is
the operator's too, but a job may point it elsewhere on purpose: the job's value wins.)
"""

from kuberl_api.job import RLTrainingJobSpec
from kuberl_api.validation.problems import Problem

RESERVED_PREFIXES = ("RAY_AUTH", "KUBERL_", "KUBERAY_")
"""Compared without case: Ray reads some of its settings in either spelling."""
RESERVED_NAMES = frozenset(
    {
        "RAY_ADDRESS",
        "RAY_CLUSTER_NAME",
        "RAY_IP",
        "RAY_PORT",
        "RAY_NODE_TYPE_NAME",
        "RAY_CLOUD_INSTANCE_ID",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
        "REDIS_PASSWORD",
    }
)


def reserved(name: str) -> bool:
    upper = name.upper()
    return upper in RESERVED_NAMES or upper.startswith(RESERVED_PREFIXES)


def reserved_env_problems(spec: RLTrainingJobSpec) -> list[Problem]:
    return [
        Problem(
            f"spec.env[{index}].name",
            "is set by the operator, KubeRay or Ray's token authentication and may not be "
            f"set by a job (reserved: {', '.join(sorted(RESERVED_NAMES))} and names starting "
            f"{', '.join(RESERVED_PREFIXES)})",
            "remove this env entry; the Ray head's token lock and address are always set "
            "by the operator",
            var.name,
        )
        for index, var in enumerate(spec.env)
        if reserved(var.name)
    ]
