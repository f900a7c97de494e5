"""Heartbeats through long phases (validation, checkpoint, export): beats while the block runs,
none after it, and none past the phase's limit so a hung phase still falls silent."""

import threading
from typing import Any

import pytest

from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.reporting import StatusReporter
from kuberl_runtime.reporting.phases import beating, interval_seconds
from kuberl_runtime.tracking.progress import NullProgressReporter
from kuberl_runtime.trainer.step_loop import StepLoop


class Patches:
    def __init__(self, wanted: int) -> None:
        self.sent: list[dict[str, Any]] = []
        self.wanted = wanted
        self.enough = threading.Event()

    def __call__(self, status: dict[str, Any]) -> None:
        self.sent.append(status)
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


class SlowExport(StepLoop):
    """The step loop with no steps and an export that lasts until three heartbeats arrived."""

    def __init__(self, patches: Patches) -> None:
        self.patches = patches
        super().__init__(None, RankInfo(0, 1, 0), 3, StatusReporter(patches))  # type: ignore[arg-type]
        self.total_steps = self.global_step = 3  # resumed at its last step: export only
        self.reporter.on_start(start_step=3, total_steps=3)

    def export(self) -> str | None:
        assert self.patches.enough.wait(30), "heartbeats while the export runs"
        return "/out/huggingface"

    def _finish_uploads(self) -> None:  # no checkpoint manager or plan here: nothing to upload
        self.uploads_finished_after_export = self.patches.enough.is_set()


def test_the_step_loop_beats_through_the_final_export(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERL_HEARTBEAT_SECONDS", "0.01")
    patches = Patches(wanted=3)
    loop = SlowExport(patches)
    loop._run_steps()
    assert loop.uploads_finished_after_export  # the run waits for its uploads before finishing
    assert len(patches.sent) >= 4  # on_start, beats, on_finish
    assert all(p["progress"]["globalStep"] == 3 for p in patches.sent)
