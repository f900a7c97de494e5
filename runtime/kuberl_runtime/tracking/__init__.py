"""Where metrics go (`trainer.logger`): the JSONL file always; console, TensorBoard, wandb, mlflow
and swanlab when selected (the last three only where installed: `tracking/external.py`).

Only rank 0 tracks. `ProgressReporter` is the hook the operator uses to patch job status.
"""

from kuberl_runtime.tracking.progress import NullProgressReporter, ProgressReporter
from kuberl_runtime.tracking.tracker import Tracker, build_tracker

__all__ = ["NullProgressReporter", "ProgressReporter", "Tracker", "build_tracker"]
