"""The runtime's status reporter: what it patches, how often, and that it never raises."""

import pytest

from kuberl_runtime.reporting import StatusReporter, status_reporter_from_env


class Clock:
    def __init__(self) -> None:
        self.now = 1_761_998_400.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sent():
    return []


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def reporter(sent, clock):
    return StatusReporter(sent.append, clock=clock, min_interval=2.0)


def test_progress_with_percent_eta_and_headline_metrics(reporter, sent, clock):
    reporter.on_start(start_step=0, total_steps=10)
    clock.now += 10
    reporter.on_step(step=2, total_steps=10, metrics={"critic/score/mean": 0.5, "timing/gen": 1.0})
    progress = sent[-1]["progress"]
    assert progress["globalStep"] == 2
    assert progress["totalSteps"] == 10
    assert progress["percent"] == 20
    assert progress["estimatedRemainingSeconds"] == 40
    assert progress["metrics"] == {"critic/score/mean": 0.5}
    assert progress["lastUpdateTime"] == "2025-11-01T12:00:10Z"


def test_steps_are_throttled_but_the_last_one_is_sent(reporter, sent, clock):
    reporter.on_start(start_step=4, total_steps=6)
    reporter.on_step(step=5, total_steps=6, metrics={})
    assert len(sent) == 1  # throttled: less than min_interval since on_start
    reporter.on_step(step=6, total_steps=6, metrics={})
    assert sent[-1]["progress"]["percent"] == 100


def test_eta_counts_only_steps_done_since_resume(reporter, sent, clock):
    reporter.on_start(start_step=5, total_steps=10)
    clock.now += 6
    reporter.on_step(step=8, total_steps=10, metrics={})
    assert sent[-1]["progress"]["estimatedRemainingSeconds"] == 4


def test_checkpoint_is_reported_with_the_step_it_was_taken_at(reporter, sent, clock):
    reporter.on_start(start_step=0, total_steps=8)
    reporter.on_step(step=4, total_steps=8, metrics={})  # throttled away
    reporter.on_checkpoint(step=4, path="/mnt/af/t/checkpoints/global_step_4")
    assert sent[-1]["checkpoint"] == {
        "latestStep": 4,
        "latestPath": "/mnt/af/t/checkpoints/global_step_4",
        "lastSavedTime": "2025-11-01T12:00:00Z",
    }
    assert sent[-1]["progress"]["globalStep"] == 4
    assert sent[-1]["progress"]["percent"] == 50


def test_a_failing_patch_never_breaks_training(clock):
    def refuse(status):
        raise RuntimeError("403 Forbidden")

    reporter = StatusReporter(refuse, clock=clock)
    reporter.on_start(start_step=0, total_steps=1)
    reporter.on_checkpoint(step=1, path="/x")
    reporter.on_finish(step=1, exported_model=None)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"KUBERL_JOB_NAME": "grpo", "KUBERL_JOB_NAMESPACE": "team-a"},  # no cluster credentials
        {"KUBERL_KUBECONFIG": "/nope"},  # no job
    ],
)
def test_no_reporter_outside_a_cluster(env):
    assert status_reporter_from_env(env) is None
