"""A tiny Qwen2.5-VL and its processor, built locally (kuberl_runtime/testing/tiny_vl.py)."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def processor() -> Any:
    from kuberl_runtime.testing.tiny_vl import build_tiny_vl_processor

    return build_tiny_vl_processor()


@pytest.fixture(scope="session")
def vl_model(processor: Any) -> Any:
    from kuberl_runtime.testing.tiny_vl import build_tiny_vl

    return build_tiny_vl(processor, seed=0)
