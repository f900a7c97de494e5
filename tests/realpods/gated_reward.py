"""The trainer tests' digit reward behind a barrier the real-pod tests hold a run at.

Loaded by path inside the pods (custom_reward_function), from the inputs directory, next to
digit_reward.py and, while a test holds a run, a file named `hold` that the test writes on the
host. `hold` names a run's checkpoint tracker: once that run has a checkpoint, its every reward
call waits until the test removes `hold`. That pins the run between two steps for as long as the
test needs (to delete its worker pod), however fast or slow the machine is; without `hold` the
scores are the digit reward's, so held and unheld runs train the same.
"""

import runpy
import time
from pathlib import Path

HOLD = Path(__file__).with_name("hold")
_digit_score = runpy.run_path(str(Path(__file__).with_name("digit_reward.py")))["compute_score"]


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    while _held():
        time.sleep(0.2)
    return _digit_score(data_source, solution_str, ground_truth, extra_info)


def _held() -> bool:
    try:
        tracker = Path(HOLD.read_text().strip())
    except FileNotFoundError:
        return False
    return tracker.exists()
