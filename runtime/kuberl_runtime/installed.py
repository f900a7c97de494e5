"""Which optional packages this runtime image has (vLLM, the external trackers): a plan that asks
for one this image lacks is refused before anything starts (``kuberl_runtime.config``)."""

from __future__ import annotations

import importlib.util


def installed(package: str) -> bool:
    """`package` is importable here (found, not imported: importing vLLM takes seconds)."""
    return importlib.util.find_spec(package) is not None
