"""Chart fixtures: the pinned helm binary, with its state kept out of the user's ~/.config."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.helm import Helm, resolve_helm

# testcluster lives in hack/ (tooling, not an installed package); localcluster.py puts hack/ on
# sys.path the same way when it is imported. Drop this once pytest's pythonpath lists hack/.
_HACK_DIR = str(Path(__file__).resolve().parents[2] / "hack")
if _HACK_DIR not in sys.path:
    sys.path.insert(0, _HACK_DIR)


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The pinned helm (hack/versions.env), as resolved for the rest of the toolchain."""
    try:
        return resolve_helm(tmp_path_factory.mktemp("helm"))
    except AssertionError as error:
        # Never skip: a missing toolchain must turn the suite red, not quietly green.
        pytest.fail(str(error), pytrace=False)
