"""Rollout engines behind one narrow interface (`RolloutEngine`); the loop never knows which."""

from kuberl_runtime.rollout.base import RolloutEngine, SamplingParams, build_response_batch

__all__ = ["RolloutEngine", "SamplingParams", "build_response_batch"]
