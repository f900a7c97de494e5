"""Making a checkpoint's bytes reach the disk before anything points at them.

A rename is atomic but not durable by itself: after a power loss or a node crash the new name can
survive while the file's data does not. So every file is fsynced before the directory holding it
is renamed, and the parent directory is fsynced after the rename (POSIX: a rename is durable once
the directory's own entry is).
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_path(path: Path) -> None:
    """fsync one file or directory (directories are opened read-only, as POSIX allows)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file under `root`, then every directory, deepest first, `root` last."""
    directories: list[Path] = []
    for current, _dirs, files in os.walk(root):
        directories.append(Path(current))
        for name in files:
            fsync_path(Path(current) / name)
    for directory in reversed(directories):
        fsync_path(directory)


def write_atomically(path: Path, text: str) -> None:
    """`path` holds either its old text or `text`, durably, whatever happens meanwhile."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)
