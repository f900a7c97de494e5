"""The runtime keeps each attempt's whole driver log on the job's volume, and Ray's job log
still gets every line (a subprocess stands in for `kuberl train` under the operator)."""

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import os, subprocess, sys
from pathlib import Path
from kuberl_runtime.reporting.driver_log import persist_driver_log
kept = persist_driver_log(Path(sys.argv[1]))
print("driver line", flush=True)
print("driver error", file=sys.stderr, flush=True)
subprocess.run([sys.executable, "-c", "print('rank line')"], check=True)
sys.stdout.write("x" * 300000 + "\\nlast line\\n")
"""


def _run(tmp_path: Path, attempt: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}
    if attempt is not None:
        env["KUBERL_ATTEMPT"] = attempt
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip


def test_each_attempt_keeps_its_whole_driver_log(tmp_path: Path) -> None:
    result = _run(tmp_path, "3")
    kept = (tmp_path / "logs" / "attempt-3" / "driver.log").read_text()
    for line in ("driver line", "driver error", "rank line", "last line"):
        assert line in kept
        assert line in result.stdout  # still reaches Ray's job log
    assert "x" * 300000 in kept


def test_nothing_is_kept_outside_the_operator(tmp_path: Path) -> None:
    result = _run(tmp_path, None)
    assert "driver line" in result.stdout
    assert not (tmp_path / "logs").exists()
