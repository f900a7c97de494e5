"""Where metrics go: console, JSONL and TensorBoard always; wandb/mlflow/swanlab when selected.

Only rank 0 tracks. `ProgressReporter` is the hook the operator uses to patch job status.
"""

from kuberl_runtime.tracking.progress import NullProgressReporter, ProgressReporter
from kuberl_runtime.tracking.tracker import Tracker, build_tracker

__all__ = ["NullProgressReporter", "ProgressReporter", "Tracker", "build_tracker"]
