"""Sharded, atomic, resumable checkpoints and the merged Hugging Face export."""

from kuberl_runtime.checkpoint.manager import TRACKER_FILE, CheckpointManager

__all__ = ["TRACKER_FILE", "CheckpointManager"]
