"""The JSON record of a running local cluster: what `down`, `status` and other tools read."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_FILE = "state.json"


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    # Kernel start time of the process (clock ticks since boot, /proc/<pid>/stat field 22). A PID
    # may be reused after its process died; the pair (pid, start_ticks) may not.
    start_ticks: int
    log: str
    argv: list[str] = field(default_factory=list)


@dataclass
class ClusterState:
    dir: str
    kubeconfig: str
    server: str
    log_dir: str
    ports: dict[str, int] = field(default_factory=dict)
    processes: list[ProcessRecord] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    # kubectl, helm, ... matching this cluster, so tools need not re-resolve hack/versions.env.
    binaries: dict[str, str] = field(default_factory=dict)
    ready: bool = False
    seconds_to_ready: float | None = None

    def pids(self) -> dict[str, int]:
        return {record.name: record.pid for record in self.processes}


def state_path(state_dir: Path) -> Path:
    return state_dir / STATE_FILE


def save_state(state: ClusterState) -> None:
    path = state_path(Path(state.dir))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    tmp.replace(path)  # atomic: a reader never sees half a file


def load_state(state_dir: Path) -> ClusterState | None:
    path = state_path(state_dir)
    if not path.exists():
        return None
    raw = json.loads(path.read_text())
    raw["processes"] = [ProcessRecord(**record) for record in raw.get("processes", [])]
    return ClusterState(**raw)
