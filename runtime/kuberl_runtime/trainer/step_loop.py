"""`StepLoop`: what the RL loop (`trainer/loop.py`) and the SFT trainer (`sft/trainer.py`) share.

The step loop itself (step, log, announce the checkpoint, report progress; export and report the
finish at the end), when a `*_freq` is due, stopping with a checkpoint on SIGTERM
(`trainer/preemption.py`), the checkpoint to resume from (after claiming the output directory,
`checkpoint/owner.py`), and rank 0's tracker.
Each trainer brings its own `train_step`, `export`, what it restores from a checkpoint, and the
uploads the run's end waits for (`checkpoint/outputs.py`'s `RunUploads`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kuberl_runtime.checkpoint.manager import CheckpointManager
from kuberl_runtime.checkpoint.manifest import check_copied_step
from kuberl_runtime.checkpoint.outputs import RunUploads
from kuberl_runtime.checkpoint.owner import claim_output_dir, claim_output_url, run_owner
from kuberl_runtime.reporting.phases import beating
from kuberl_runtime.tracking import NullProgressReporter, ProgressReporter, Tracker, build_tracker
from kuberl_runtime.trainer.preemption import Preempted, StopRequest, stop_file_from_env
from kuberl_runtime.trainer.state import step_of

if TYPE_CHECKING:
    from kuberl_api.plan import RunPlan
    from kuberl_api.plan.sft import SFTPlan
    from kuberl_runtime.distributed import RankInfo

logger = logging.getLogger(__name__)


class StepLoop:
    plan: RunPlan | SFTPlan
    checkpoints: CheckpointManager

    def __init__(
        self,
        plan: RunPlan | SFTPlan,
        ranks: RankInfo,
        total_steps: int,
        reporter: ProgressReporter,
        uploads: RunUploads,
    ) -> None:
        self.plan = plan
        self.uploads = uploads
        self.ranks = ranks
        self.total_steps = total_steps
        # The control plane hears from rank 0 only.
        self.reporter = reporter if ranks.is_main else NullProgressReporter()
        self.global_step = 0
        self.tracker = Tracker([])  # fit() installs rank 0's backends
        self._saved: tuple[int, Path] | None = None  # a checkpoint not yet announced
        self.stop_request = StopRequest(stop_file_from_env())

    def save_checkpoint(self, step: int) -> Path:
        raise NotImplementedError

    def train_step(self, step: int) -> dict[str, float]:
        raise NotImplementedError

    def export(self) -> str | None:
        raise NotImplementedError

    def _run_steps(self) -> None:
        """Steps up to the total, then the export; `fit` opens and closes the tracker."""
        total = self.total_steps
        self.stop_request.install()
        while self.global_step < total:
            self.global_step += 1
            step_metrics = self.train_step(self.global_step)
            self.tracker.log(step_metrics, step=self.global_step)
            stopping = self.stop_request.agreed()
            if stopping:
                self._save_before_stopping(self.global_step)
            self._announce_checkpoint()
            self.reporter.on_step(step=self.global_step, total_steps=total, metrics=step_metrics)
            if stopping:
                self._finish_uploads()
                raise Preempted(self.global_step)
        with beating(self.reporter, "export"):  # the operator hears it is alive
            exported = self.export()
        self._finish_uploads()  # the last checkpoint's upload overlapped the export
        self.reporter.on_finish(step=self.global_step, exported_model=exported)

    def _finish_uploads(self) -> None:
        """The last checkpoint's upload, then (af_output_dir a URL) the merged model and logs."""
        with beating(self.reporter, "checkpoint"):
            self.uploads.finish(self.global_step)

    def _save_before_stopping(self, step: int) -> None:
        """A checkpoint at `step`, whatever save_freq says (unless the step just wrote one)."""
        if self._saved is not None and self._saved[0] == step:
            return
        logger.warning("stop requested: saving a checkpoint at step %d before exiting", step)
        with beating(self.reporter, "checkpoint"):
            self.save_checkpoint(step)

    def _due(self, freq: int, step: int) -> bool:
        return freq > 0 and (step % freq == 0 or step == self.total_steps)

    def _announce_checkpoint(self) -> None:
        """Report a step's checkpoint only once that step's metrics are logged.

        Whoever stops the run after hearing of checkpoint N (the operator, a test) then finds step
        N's metrics line written, and the resumed attempt continues the file at step N + 1.
        """
        if self._saved is None:
            return
        step, path = self._saved
        self._saved = None
        self.reporter.on_checkpoint(step=step, path=str(path))
        self.tracker.on_checkpoint(step)

    def _checkpoint_to_resume(self) -> Path | None:
        """The step directory `trainer.resume_mode` names, or None to start at step 0; drops
        what an interrupted save left behind first."""
        trainer = self.plan.trainer
        owner = run_owner(os.environ, trainer.project_name, trainer.experiment_name)
        claim_output_dir(Path(self.plan.paths.output_dir), owner, self.ranks)
        if self.plan.paths.output_url:  # the staging directory is the pod's own
            claim_output_url(self.plan.paths.output_url, owner, self.ranks)
        self.checkpoints.remove_partial_writes()
        if trainer.resume_mode == "disable":
            return None
        if trainer.resume_mode == "resume_path":
            assert trainer.resume_from_path, "resume_mode=resume_path needs resume_from_path"
            step_dir = Path(trainer.resume_from_path)
            step_of(step_dir)
            self._check_copied(step_dir)
        else:
            latest = self.checkpoints.latest_step()
            if latest is None:
                return None
            step_dir = self.checkpoints.step_dir(latest)
        logger.info("resuming from %s", step_dir)
        return step_dir

    def _check_copied(self, step_dir: Path) -> None:
        """A resume_from_path URL was copied by the initializer: resume only a complete step."""
        for item in self.plan.paths.remote_inputs:
            if Path(item.local_path) == step_dir:
                check_copied_step(step_dir, item.url)

    def _tracker(self) -> Tracker:
        trainer = self.plan.trainer
        return build_tracker(
            is_main=self.ranks.is_main,
            log_dir=Path(self.plan.paths.logs_dir),
            loggers=trainer.loggers,
            total_steps=self.total_steps,
            start_step=self.global_step,
            project=trainer.project_name,
            experiment=trainer.experiment_name,
            config=self.plan.source,
        )
