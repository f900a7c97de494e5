"""The run plan: one frozen, fully resolved description of a run, built once from a validated job.

Engines, the trainer loop, the launchers and the operator's submission read only this.
"""

from kuberl_api.plan.build import build_run_plan
from kuberl_api.plan.run_plan import RunPlan

__all__ = ["RunPlan", "build_run_plan"]
