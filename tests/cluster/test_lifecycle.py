"""`localcluster.py up|status|down` as the Makefile runs them: nothing survives `down`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testcluster.processes import start_ticks

pytestmark = pytest.mark.cluster

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "localcluster.py"
COMPONENTS = {
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kueue",
    "kwok",
    "ray-operator",
}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )


def processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line names `text`: any straggler of the cluster, recorded or not."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().decode(errors="replace"):
                pids.append(int(cmdline.parent.name))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return pids


def test_up_status_down_leaves_no_process_behind(cluster_binaries, tmp_path: Path) -> None:
    state_dir = tmp_path / "cluster"
    up = cli("up", "--dir", str(state_dir))
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.loads((state_dir / "state.json").read_text())
    records = {p["name"]: p for p in state["processes"]}
    assert set(records) == COMPONENTS
    assert all(start_ticks(p["pid"]) == p["start_ticks"] for p in records.values())
    assert cli("status", "--dir", str(state_dir)).returncode == 0

    kubectl = [str(cluster_binaries.kubectl), f"--kubeconfig={state['kubeconfig']}"]
    get_nodes = [*kubectl, "get", "nodes", "-o", "name"]
    nodes = subprocess.run(get_nodes, capture_output=True, text=True, check=True).stdout
    assert {"node/gpu-0", "node/npu-0", "node/cpu-0"} <= set(nodes.split())

    down = cli("down", "--dir", str(state_dir))
    assert down.returncode == 0, down.stdout + down.stderr
    survivors = [name for name, p in records.items() if start_ticks(p["pid"]) == p["start_ticks"]]
    assert survivors == []
    assert processes_mentioning(str(state_dir)) == []
    assert not (state_dir / "state.json").exists() and not (state_dir / "etcd").exists()
    assert sorted(path.stem for path in (state_dir / "logs").glob("*.log")) == sorted(COMPONENTS)
    assert cli("status", "--dir", str(state_dir)).returncode == 1
