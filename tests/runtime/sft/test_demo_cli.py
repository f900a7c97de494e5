"""The demos' shared command line (`kuberl_runtime.demo_cli`): OUT_DIR and --seed reach the
demo's `run_demo`, its report is what the command prints, and both demo modules answer --help
with their docstring's first line. The demos themselves: test_demo_learning.py, test_demo_tool.py.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kuberl_runtime.demo_cli import demo_main


@dataclass
class Report:
    out_dir: str | Path
    seed: int

    def report(self) -> str:
        return f"ran in {self.out_dir} on seed {self.seed}"


def test_out_dir_and_seed_reach_the_demo_and_its_report_is_printed(capsys) -> None:
    assert demo_main("A demo.\n\nmore", Report, ["/tmp/out", "--seed", "3"]) == 0
    assert capsys.readouterr().out == "ran in /tmp/out on seed 3\n"
    assert demo_main("A demo.", Report, ["rel"]) == 0
    assert capsys.readouterr().out == "ran in rel on seed 0\n"


@pytest.mark.parametrize(
    ("module", "first_line"),
    [
        ("demo_learning", "A model that visibly learns: SFT warm-start, then GRPO"),
        ("demo_tool", "A model that learns to use a tool: SFT warm-start, then GRPO"),
    ],
)
def test_each_demo_module_keeps_its_command_line(module: str, first_line: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"kuberl_runtime.{module}", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"usage: {module}.py [-h] [--seed SEED] out_dir" in done.stdout
    assert first_line in " ".join(done.stdout.split())
