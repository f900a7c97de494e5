"""What an admin allows job authors (operator settings, chart values), checked at validation.

KubeRay creates the pods of every RayCluster the operator creates, so a job author who may not
create pods must not get hostPath volumes or other people's Secrets through a job: both are off
unless the admin turns them on (``--allow-host-path``, ``--allow-secret-env``).
"""

import json
from dataclasses import dataclass

from kuberl_api.job import RLTrainingJobSpec
from kuberl_api.validation.problems import Problem
from kuberl_operator.config import OperatorConfig
from kuberl_operator.pod_rules import pod_problems
from kuberl_operator.reserved_env import reserved_env_problems

MAX_BACKEND_CONFIG_BYTES = 256 * 1024
"""A verl config is a few KiB; past this it is a mistake (data inlined, a runaway generator),
and it travels in every submission and the job's audit file."""


@dataclass(frozen=True)
class PolicySettings:
    """The operator settings validation reads, and nothing else: with the spec they decide the
    verdict, so a verdict is remembered by a digest of both (``verdicts.py``)."""

    allow_host_path: bool
    allow_host_network: bool
    allow_secret_env: bool

    @classmethod
    def of(cls, config: OperatorConfig) -> "PolicySettings":
        return cls(config.allow_host_path, config.allow_host_network, config.allow_secret_env)


def policy_problems(spec: RLTrainingJobSpec, config: PolicySettings) -> list[Problem]:
    problems: list[Problem] = reserved_env_problems(spec) + pod_problems(spec)
    size = len(json.dumps(spec.training_config.model_dump(mode="json")))
    if size > MAX_BACKEND_CONFIG_BYTES:
        problems.append(
            Problem(
                f"spec.{spec.training_config_key}",
                f"is {size // 1024} KiB as JSON, over the {MAX_BACKEND_CONFIG_BYTES // 1024} "
                "KiB limit",
                "keep data out of the config: reference files (data.train_files) instead",
            )
        )
    if not config.allow_host_path:
        for field, source in (("output", spec.storage.output), ("model", spec.storage.model)):
            if source is not None and source.host_path:
                problems.append(
                    Problem(
                        f"spec.storage.{field}.hostPath",
                        "hostPath volumes are turned off by the cluster admin",
                        "use a PersistentVolumeClaim (claimName), or ask the admin for the "
                        "chart value operator.allowHostPath",
                        source.host_path,
                    )
                )
    if spec.network == "hostNetwork" and not config.allow_host_network:
        problems.append(
            Problem(
                "spec.network",
                "hostNetwork is turned off by the cluster admin: the job's Ray pods would bind "
                "ports of the node and no NetworkPolicy would guard them",
                "use network: pod, or ask the admin for the chart value operator.allowHostNetwork",
                spec.network,
            )
        )
    if not config.allow_secret_env:
        for index, var in enumerate(spec.env):
            if var.value_from and "secretKeyRef" in var.value_from:
                problems.append(
                    Problem(
                        f"spec.env[{index}].valueFrom.secretKeyRef",
                        "Secret references in env are turned off by the cluster admin",
                        "ask the admin for the chart value operator.allowSecretEnv",
                        var.name,
                    )
                )
    return problems
