"""The runtime's edge: a job file or a plan file becomes one frozen run plan.

``load_plan_file`` reads a plan as the operator ships it (``kuberl train --plan``): JSON of this
release's ``plan_version`` (``kuberl_api.plan.version``), loaded as is, never validated or
planned again. ``load_run_config`` reads a config (``kuberl train CONFIG``: a bare
backend_config, a ModelArts YAML or a full RLTrainingJob manifest, with dotted ``key=value``
overrides) and resolves it with the operator's own function (``kuberl_api.plan.from_document``);
``${oc.env:...}`` reads this machine's environment there. Either way the checks that depend on
this image (``check_runtime``) run on the plan before anything starts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kuberl_api.plan import RunPlan
from kuberl_api.plan.from_document import load_plan_json, plan_job_file, plan_tree
from kuberl_api.plan.sft import SFTPlan
from kuberl_api.plan.version import PLAN_VERSION, PlanFileError
from kuberl_api.validation.problems import Problem, SpecInvalid
from kuberl_runtime.installed import installed
from kuberl_runtime.tracking.external import INSTALL_HINTS, missing_trackers
from kuberl_runtime.trainer.start_checks import start_refusals


@dataclass(frozen=True)
class RunConfig:
    """One run: its frozen plan (``kuberl_api.plan``), the only thing the runtime reads."""

    plan: RunPlan | SFTPlan

    @property
    def checkpoint_dir(self) -> Path:
        """`trainer.default_local_dir`, resolved when the plan was built."""
        return Path(self.plan.paths.checkpoint_dir)

    @property
    def output_dir(self) -> Path:
        """af_output_dir, or the checkpoint directory itself when there is none.

        Logs go to `<output_dir>/logs/` and the exported model to `<output_dir>/huggingface/`.
        """
        return Path(self.plan.paths.output_dir)

    def to_json(self) -> str:
        return self.plan.to_json()

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        """A plan's JSON; another release's plan is refused (``PlanFileError``)."""
        return cls(load_plan_json(text))


def load_plan_file(path: str | Path) -> RunConfig:
    """A plan file ("-": stdin) as is: its version checked, then the checks of this image."""
    text = sys.stdin.read() if str(path) == "-" else Path(path).read_text()
    try:
        run = RunConfig.from_json(text)
    except ValidationError as err:  # the right version, but not a plan of it (edited by hand?)
        raise PlanFileError(
            f"not a plan of plan_version {PLAN_VERSION}: {err.error_count()} field(s) do not "
            f"match, first {err.errors()[0]['loc']}: {err.errors()[0]['msg']}; use the plan "
            "the operator wrote, or run the job's config with `kuberl train CONFIG`"
        ) from err
    check_runtime(run)
    return run


def load_run_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """The single job in `path` ("-": stdin) with `a.b.c=value` overrides, validated (refused
    keys are errors) and planned; ``${oc.env:...}`` reads this run's environment."""
    job = plan_job_file(path, overrides, allow_env=True)
    run = RunConfig(job.plan)
    check_runtime(run, job.config_path)
    return run


def check_runtime(run: RunConfig, config_path: str = "") -> None:
    """What the plan asks of this image: wandb / mlflow / swanlab in trainer.logger and the vLLM
    rollout must be importable where the run trains; and the models' own refusals
    (``trainer/start_checks.py``), for a model validation could not read. ``config_path``: where
    the config sits in its file."""
    prefix = f"{config_path}." if config_path else ""
    problems = [
        Problem(
            f"{prefix}trainer.logger",
            f"{name} is not installed in this runtime",
            f"{INSTALL_HINTS[name]}, or remove {name} from trainer.logger",
            name,
        )
        for name in missing_trackers(run.plan.trainer.loggers)
    ]
    rollout = getattr(run.plan, "rollout", None)  # an SFT plan has none
    if rollout is not None and rollout.name == "vllm" and not installed("vllm"):
        problems.append(
            Problem(
                f"{prefix}actor_rollout_ref.rollout.name",
                "vllm is not installed in this runtime",
                "run the job on an image with vLLM (runtime-cuda, runtime-npu), or set "
                "actor_rollout_ref.rollout.name: hf for the Hugging Face engine",
                "vllm",
            )
        )
    problems += [  # what the models' config.json rules out (validation read what it could)
        Problem(f"{prefix}{r.key}", r.message, r.fix, r.value) for r in start_refusals(run.plan)
    ]
    if problems:
        raise SpecInvalid(problems)


def run_config_from_dict(backend_config: dict[str, Any]) -> RunConfig:
    """A bare backend_config tree (as code builds it: tests, benchmarks), validated and planned."""
    return RunConfig(plan_tree(backend_config))
