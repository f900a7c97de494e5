"""A stand-in for ``kuberl`` on the local Ray head's PATH, for lifecycle tests that need no model.

``kuberl train --plan FILE`` (the operator's submission) whose plan's ``trainer.experiment_name``
starts with ``fake-`` behaves as named:

* ``fake-fail``: exits 1 with a traceback, before any step;
* ``fake-config``: exits 2, as ``kuberl train`` does on an invalid config;
* ``fake-steps-N-SECONDS``: N steps of SECONDS each, a checkpoint per step in the plan's
  checkpoint directory and progress through the real runtime reporter, resuming from the newest
  checkpoint when ``resume_mode`` is auto.
* ``fake-graceful-N-SECONDS``: the same, and on SIGTERM (``ray job stop``) it finishes the step
  in flight, checkpoints it, takes 3 s more "saving" and exits 143, as the runtime does
  (trainer/preemption.py).

``fault-POINT-STEP`` runs the real ``kuberl`` with ``KUBERL_FAULT_POINT=POINT`` and
``KUBERL_FAULT_STEP=STEP`` in its first attempt only. On a real cluster a job's ``env`` reaches
its pods' processes; here the Ray job runs on the local head, so this shim stands in for it.

Anything else runs the real ``kuberl`` beside this interpreter.
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path


def main() -> int:
    real = Path(sys.executable).parent / "kuberl"
    if sys.argv[1:3] != ["train", "--plan"] or len(sys.argv) < 4:
        os.execv(real, [str(real), *sys.argv[1:]])
    plan = json.loads(Path(sys.argv[3]).read_text())
    trainer = plan["trainer"]
    name = trainer["experiment_name"]
    if name.startswith("fault-") and os.environ.get("KUBERL_ATTEMPT") == "1":
        _, point, step = name.split("-")
        os.environ.update(KUBERL_FAULT_POINT=point, KUBERL_FAULT_STEP=step)
    if not name.startswith("fake-"):
        os.execv(real, [str(real), *sys.argv[1:]])
    print(f"fake kuberl train: {name}", flush=True)
    if name == "fake-fail":
        print("Traceback (most recent call last):\nRuntimeError: deliberate failure", flush=True)
        return 1
    if name == "fake-config":
        print("error: backend_config.data.train_files: no such file", flush=True)
        return 2
    _, mode, steps, seconds = name.split("-")
    stop = threading.Event()
    if mode == "graceful":
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return run_steps(Path(plan["paths"]["checkpoint_dir"]), trainer["resume_mode"], int(steps),
                     float(seconds), stop)  # fmt: skip


def run_steps(
    ckpt_dir: Path, resume_mode: str, total: int, seconds: float, stop: threading.Event
) -> int:
    from kuberl_runtime.reporting import status_reporter_from_env

    reporter = status_reporter_from_env()
    tracker = ckpt_dir / "latest_checkpointed_iteration.txt"
    start = int(tracker.read_text()) if resume_mode == "auto" and tracker.exists() else 0
    print(f"resumed from step {start}" if start else "starting from step 0", flush=True)
    if reporter:
        reporter.on_start(start_step=start, total_steps=total)
    for step in range(start + 1, total + 1):
        time.sleep(seconds)
        path = ckpt_dir / f"global_step_{step}"
        path.mkdir(parents=True, exist_ok=True)
        tracker.write_text(str(step))
        print(f"step {step}/{total}", flush=True)
        if reporter:
            reporter.on_step(step=step, total_steps=total, metrics={"critic/score/mean": step})
            reporter.on_checkpoint(step=step, path=str(path))
        if stop.is_set():
            time.sleep(3)  # a real save takes a while: the operator must wait for it
            print(f"stopped on request after saving a checkpoint at step {step}", flush=True)
            return 143
    if reporter:
        reporter.on_finish(step=total, exported_model=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
