"""Print kuberl's requirements for an image, one per line: pyproject.toml's dependencies, then
each named extra's, in order. The Dockerfiles install these in a layer before copying the sources,
so a source change rebuilds only kuberl itself. Standard library only (runs in a bare venv):

    python requirements.py PYPROJECT [EXTRA ...]
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def requirements(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    known = project.get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in known]
    if unknown:
        raise SystemExit(
            f"{pyproject}: extra {', '.join(map(repr, unknown))} is not in"
            f" [project.optional-dependencies]; name one of: {', '.join(sorted(known))}"
        )
    listed: list[str] = list(project["dependencies"])
    for extra in extras:
        listed += known[extra]
    return listed


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit("usage: python requirements.py PYPROJECT [EXTRA ...]")
    sys.stdout.write("".join(f"{line}\n" for line in requirements(Path(argv[0]), argv[1:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
