"""The driver log of each attempt, kept by the runtime itself on the job's own volume.

Under the operator (KUBERL_ATTEMPT is set on every submission) everything the driver and the
ranks it starts write to stdout/stderr also goes to ``<af_output_dir>/logs/attempt-N/driver.log``,
while still reaching Ray's job log. The operator reads only a short redacted tail from the head;
the whole log stays here, beside the checkpoints, readable by whoever may read the volume.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

_CHUNK = 64 << 10


class DriverLog:
    """fd 1 and 2 of this process go through a pipe; a thread copies it to the old stdout and
    to the file. ``close()`` (also at exit) restores the descriptors and drains the pipe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed by close()
        self._saved = (os.dup(1), os.dup(2))
        read_end, write_end = os.pipe()
        _flush()
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        os.close(write_end)
        self._thread = threading.Thread(target=self._copy, args=(read_end,), daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def _copy(self, read_end: int) -> None:
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            while chunk := pipe.read(_CHUNK):
                os.write(self._saved[0], chunk)
                # A full volume must not stop the copy to Ray's log.
                with contextlib.suppress(OSError):
                    self._file.write(chunk)

    def close(self) -> None:
        if self._file.closed:
            return
        _flush()
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        self._thread.join(timeout=10)  # ends when no child holds the pipe's write end
        self._file.close()


def persist_driver_log(
    output_dir: Path, environ: Mapping[str, str] | None = None
) -> DriverLog | None:
    """Tee this process's output into the attempt's driver.log; None outside the operator."""
    env = os.environ if environ is None else environ
    attempt = env.get("KUBERL_ATTEMPT")
    if not attempt or not attempt.isdigit():
        return None
    path = Path(output_dir) / "logs" / f"attempt-{int(attempt)}" / "driver.log"
    try:
        return DriverLog(path)
    except OSError as err:
        log.warning("could not keep the driver log at %s: %s", path, err)
        return None


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
