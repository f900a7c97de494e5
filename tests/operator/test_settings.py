"""Operator flags and kopf settings that the chart relies on."""

import argparse

import pytest

from kuberl_operator.config import add_arguments, from_args
from kuberl_operator.handlers import build_settings


def parse(argv: list[str]):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_args(parser.parse_args(argv))


def test_log_format_comes_from_the_chart_env_var(monkeypatch):
    monkeypatch.setenv("KUBERL_LOG_FORMAT", "json")
    assert parse([]).log_format == "json"
    assert parse(["--log-format", "plain"]).log_format == "plain"


def test_unknown_log_format_is_refused():
    with pytest.raises(SystemExit):
        parse(["--log-format", "xml"])


@pytest.mark.parametrize(("argv", "scanning_off"), [(["-n", "team-a"], True), (["-A"], False)])
def test_namespaced_operator_does_not_scan_the_cluster(argv, scanning_off):
    # The chart's namespaced RBAC cannot list namespaces or CRDs; scanning would retry 403s.
    assert build_settings(parse(argv)).scanning.disabled is scanning_off
