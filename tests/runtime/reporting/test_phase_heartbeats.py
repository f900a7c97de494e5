"""Heartbeats through long phases (validation, checkpoint, export): beats while the block runs,
none after it, and none past the phase's limit so a hung phase still falls silent."""

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from kuberl_api.plan.sections import PathsPlan
from kuberl_api.storage import mirror_url
from kuberl_runtime.checkpoint.manager import CheckpointManager
from kuberl_runtime.checkpoint.manifest import MANIFEST_FILE
from kuberl_runtime.checkpoint.outputs import RunUploads
from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.reporting import StatusReporter
from kuberl_runtime.reporting.phases import beating, interval_seconds
from kuberl_runtime.tracking.progress import NullProgressReporter
from kuberl_runtime.trainer.step_loop import StepLoop


class Patches:
    def __init__(self, wanted: int, watch: Path | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.wanted = wanted
        self.enough = threading.Event()
        self.watch = watch
        self.watched: list[bool] = []
        """Whether ``watch`` existed when each patch was sent."""

    def __call__(self, status: dict[str, Any]) -> None:
        self.sent.append(status)
        self.watched.append(self.watch is not None and self.watch.exists())
        if len(self.sent) >= self.wanted:
            self.enough.set()


def test_a_long_phase_beats_with_the_last_step_and_stops_after_it() -> None:
    patches = Patches(wanted=4)
    reporter = StatusReporter(patches)
    reporter.on_start(start_step=7, total_steps=10)
    with beating(reporter, "validation", interval=0.01):
        assert patches.enough.wait(30), "three heartbeats during the phase"
    after = len(patches.sent)
    beats = patches.sent[1:]
    assert all(b["progress"]["globalStep"] == 7 for b in beats)
    assert all(b["progress"]["totalSteps"] == 10 for b in beats)
    assert not any(t.name == "heartbeat-validation" for t in threading.enumerate())
    assert len(patches.sent) == after


def test_the_default_interval_is_well_under_the_operators_floor() -> None:
    assert interval_seconds() == 60.0  # the operator's progress floor: 900 s


def test_a_phase_past_its_limit_falls_silent() -> None:
    patches = Patches(wanted=1_000_000)
    reporter = StatusReporter(patches)
    with beating(reporter, "checkpoint", interval=0.01, limit=0.0):
        threads = [t for t in threading.enumerate() if t.name == "heartbeat-checkpoint"]
        for thread in threads:
            thread.join(30)
        assert threads and not any(t.is_alive() for t in threads)
    assert patches.sent == []


def test_without_a_status_reporter_nothing_beats() -> None:
    with beating(NullProgressReporter(), "export", interval=0.01):
        assert not any(t.name == "heartbeat-export" for t in threading.enumerate())


def url_outputs(root: Path) -> PathsPlan:
    """A run's paths under ``root`` with af_output_dir a (file://) URL: its end uploads the
    merged model and the logs there."""
    return PathsPlan(
        output_dir=str(root / "out"),
        output_url=mirror_url(str(root / "store")),
        checkpoint_dir=str(root / "out" / "checkpoints"),
        logs_dir=str(root / "out" / "logs"),
        hf_export_dir=str(root / "out" / "huggingface"),
        input_cache_dir=str(root / "out" / "cache" / "inputs"),
        remote_inputs=[],
    )


class SlowExport(StepLoop):
    """The step loop with no steps and an export that lasts until three heartbeats arrived, then
    writes the merged model; its uploads are the real ones, to a file:// af_output_dir."""

    def __init__(self, patches: Patches, paths: PathsPlan) -> None:
        self.patches = patches
        self.paths = paths
        ranks = RankInfo(0, 1, 0)
        uploads = RunUploads(CheckpointManager(paths.checkpoint_dir, ranks), paths, ranks)
        super().__init__(None, ranks, 3, StatusReporter(patches), uploads)  # type: ignore[arg-type]
        self.total_steps = self.global_step = 3  # resumed at its last step: export only
        self.reporter.on_start(start_step=3, total_steps=3)

    def export(self) -> str | None:
        assert self.patches.enough.wait(30), "heartbeats while the export runs"
        model = Path(self.paths.hf_export_dir)
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
        return str(model)


def test_the_step_loop_beats_through_the_final_export(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBERL_HEARTBEAT_SECONDS", "0.01")
    uploaded = tmp_path / "store" / "huggingface" / MANIFEST_FILE
    patches = Patches(wanted=3, watch=uploaded)
    loop = SlowExport(patches, url_outputs(tmp_path))
    loop._run_steps()
    # The run uploaded what the export wrote, and only then reported its finish (the last patch).
    manifest = json.loads(uploaded.read_text())
    assert [s["path"] for s in manifest["shards"]] == ["config.json"]
    assert patches.watched[0] is False and patches.watched[-1] is True
    assert len(patches.sent) >= 4  # on_start, beats, on_finish
    assert all(p["progress"]["globalStep"] == 3 for p in patches.sent)
