"""Fault injection for tests of crash safety: the process kills itself at a named point.

Set `KUBERL_FAULT_POINT=<point>` (and optionally `KUBERL_FAULT_STEP=<global step>`) in the
environment of a run; when the run reaches that point it sends itself SIGKILL — no cleanup, no
`finally`, exactly like a node loss. Points: `checkpoint_write` (model shards written, before the
rename), `step_middle` (after generation, before the updates), `gen_batch` (DAPO's dynamic
sampling: a generation batch left the step short and its partial step is written).
"""

from __future__ import annotations

import os
import signal

FAULT_POINT_ENV = "KUBERL_FAULT_POINT"
FAULT_STEP_ENV = "KUBERL_FAULT_STEP"


def maybe_crash(point: str, step: int | None = None) -> None:
    if os.environ.get(FAULT_POINT_ENV) != point:
        return
    wanted = os.environ.get(FAULT_STEP_ENV)
    if wanted is not None and step is not None and int(wanted) != step:
        return
    os.kill(os.getpid(), signal.SIGKILL)
