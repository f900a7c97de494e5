"""The ``Initializing`` condition: the runtime's model/data initializer, as the job shows it.

Before any rank loads a model, the runtime copies the run's remote models and data into the
input cache (``kuberl_runtime/initializer.py``) and heartbeats its progress on the job's status:
``progress`` with ``globalStep: 0`` and the metrics ``initializer/copied_bytes`` and
``initializer/total_bytes`` (one URL at a time). While that payload is the job's progress the
condition is True (reason ``CopyingInputs``, the bytes so far in the message); once the trainer's
own progress replaces it, False (reason ``InputsReady``). A job without remote inputs never
heartbeats the initializer and never gets the condition.
"""

from kuberl_api.job import Progress
from kuberl_operator import conditions as cond
from kuberl_operator.state import JobState

COPIED = "initializer/copied_bytes"
TOTAL = "initializer/total_bytes"
COPYING = "CopyingInputs"
READY = "InputsReady"
_MIB = float(1 << 20)


def initializer_message(progress: Progress | None) -> str | None:
    """The initializer's progress in words, or None when ``progress`` is not its heartbeat."""
    if progress is None or progress.global_step != 0:
        return None
    metrics = progress.metrics
    if COPIED not in metrics or TOTAL not in metrics:
        return None
    copied, total = metrics[COPIED], metrics[TOTAL]
    percent = int(100 * copied // total) if total > 0 else 100
    return (
        "copying remote models and data into the input cache: "
        f"{copied / _MIB:.1f} of {total / _MIB:.1f} MiB ({percent}%)"
    )


def observe_initializing(state: JobState) -> None:
    """Set Initializing from the job's progress (True while the initializer heartbeats)."""
    message = initializer_message(state.status.progress)
    if message is not None:
        state.condition(cond.INITIALIZING, True, COPYING, message)
    elif cond.is_true(state.status, cond.INITIALIZING):
        state.condition(
            cond.INITIALIZING, False, READY, "remote models and data are in the input cache"
        )
