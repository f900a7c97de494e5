"""`trainer.device` from the run plan, checked against the machine: never a silent CPU run."""

import logging

import pytest

from kuberl_runtime import device as device_module
from kuberl_runtime.device import DeviceUnavailable, resolve_device


@pytest.fixture
def cpu_only(monkeypatch):
    monkeypatch.setattr(device_module, "detect_device_type", lambda: "cpu")


@pytest.mark.parametrize("requested", ["cuda", "npu"])
def test_an_accelerator_that_is_not_visible_is_an_error(cpu_only, requested):
    with pytest.raises(DeviceUnavailable) as err:
        resolve_device(requested)
    message = str(err.value)
    assert f"trainer.device is {requested}" in message
    assert "trainer.device: cpu" in message


def test_auto_takes_what_the_machine_has_and_says_so(cpu_only, caplog):
    with caplog.at_level(logging.INFO, logger="kuberl_runtime.device"):
        assert resolve_device("auto").type == "cpu"
    assert "trainer.device not set: using cpu" in caplog.text


def test_cpu_is_always_available(cpu_only):
    assert resolve_device("cpu").type == "cpu"


def test_a_visible_accelerator_is_used(monkeypatch):
    monkeypatch.setattr(device_module, "detect_device_type", lambda: "cuda")
    assert resolve_device("cuda").type == "cuda"
    assert resolve_device("cpu").type == "cpu"
