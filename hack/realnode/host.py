"""What the real node leaves on the host, and how it is undone: cgroups, mounts, processes,
iptables chains. Pure host inspection and cleanup; node.py decides when."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

log = logging.getLogger("realnode")


def cgroup_hierarchies() -> list[Path]:
    """Mount points of every cgroup hierarchy: v1 controllers, and v2 (the root when unified,
    /sys/fs/cgroup/unified in hybrid mode, where the kubelet creates its cgroups too)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype = right.split()[0] if right else ""
        if fstype in ("cgroup", "cgroup2"):
            points.append(Path(left.split()[4]))
    return points


def cgroup_dirs(cgroup_root: str) -> list[Path]:
    return [point / cgroup_root.lstrip("/") for point in cgroup_hierarchies()]


def make_cgroups(cgroup_root: str) -> None:
    for path in cgroup_dirs(cgroup_root):
        path.mkdir(exist_ok=True)
        # A new cpuset cgroup starts empty; children cannot run anywhere until it is filled.
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (path / name).exists() and not (path / name).read_text().strip():
                (path / name).write_text((path.parent / name).read_text())


def kill_cgroup_members(cgroup_root: str) -> None:
    """SIGKILL what still runs in the node's own cgroups (pods whose shim died first)."""
    for path in cgroup_dirs(cgroup_root):
        for procs in path.rglob("cgroup.procs") if path.exists() else ():
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)


def remove_cgroups(cgroup_root: str) -> None:
    for path in cgroup_dirs(cgroup_root):
        if not path.exists():
            continue
        for child in sorted(
            (p for p in path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
        ):
            rmdir_retrying(child)
        rmdir_retrying(path)


def rmdir_retrying(path: Path) -> None:
    for _ in range(50):  # a killed process leaves its cgroup a moment later
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    log.warning("could not remove cgroup %s", path)


def mounts_under(work: Path) -> list[str]:
    prefix = str(work.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return points


def unmount_under(work: Path) -> None:
    # Deepest first; a bind mount of the kubelet's root dir onto itself is the last one.
    for _ in range(5):
        points = sorted(set(mounts_under(work)), key=len, reverse=True)
        if not points:
            return
        for point in points:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def processes_mentioning(work: str) -> list[tuple[int, str]]:
    """Live processes whose command line names the work dir (containerd shims, runc)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if work in cmdline:
            found.append((int(proc.name), cmdline.strip()[:200]))
    return found


def kube_chains() -> list[str]:
    """KUBE-* chains in the host's iptables (the kubelet is configured to make none)."""
    chains = []
    for tool in ("iptables-save", "ip6tables-save"):
        if shutil.which(tool) is None:
            continue
        result = subprocess.run([tool], capture_output=True, text=True, check=False)
        chains += [
            f"{tool}: {line.split()[0][1:]}"
            for line in result.stdout.splitlines()
            if line.startswith(":KUBE-")
        ]
    return chains
