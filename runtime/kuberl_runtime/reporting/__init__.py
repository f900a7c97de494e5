"""Reporting training progress to the control plane (the RLTrainingJob status subresource)."""

from kuberl_runtime.reporting.k8s import StatusReporter, status_reporter_from_env

__all__ = ["StatusReporter", "status_reporter_from_env"]
