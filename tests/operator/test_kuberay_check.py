"""At start the operator refuses a KubeRay whose RayCluster CRD cannot lock heads."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from freeport import free_port
from kubernetes import client

from kuberl_operator.kuberay_check import auth_options_problem, kuberay_problem


def crd(spec_fields: list[str], version: str = "v1") -> dict[str, Any]:
    properties = {name: {"type": "object"} for name in spec_fields}
    schema = {"openAPIV3Schema": {"properties": {"spec": {"properties": properties}}}}
    return {"spec": {"versions": [{"name": version, "schema": schema}]}}


def test_a_crd_with_auth_options_passes() -> None:
    assert auth_options_problem(crd(["headGroupSpec", "authOptions"])) is None


def test_an_older_kuberay_is_refused_naming_the_field_and_the_fix() -> None:
    problem = auth_options_problem(crd(["headGroupSpec", "workerGroupSpecs"]))
    assert problem is not None
    assert "rayclusters.ray.io (v1) has no spec.authOptions" in problem
    assert "upgrade KubeRay" in problem and "kubectl apply --server-side" in problem


def test_no_crd_or_no_v1_is_refused() -> None:
    missing = auth_options_problem(None)
    assert missing is not None and "is not installed" in missing
    old = auth_options_problem(crd(["authOptions"], version="v1alpha1"))
    assert old is not None and "has no version v1" in old


def _api_answering(status: int) -> Iterator[client.ApiClient]:
    """A Kubernetes client whose API server answers every request with ``status``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"kind": "Status", "apiVersion": "v1", "code": status}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield client.ApiClient(config)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def forbidden() -> Iterator[client.ApiClient]:
    yield from _api_answering(403)


@pytest.fixture
def failing() -> Iterator[client.ApiClient]:
    yield from _api_answering(500)


def test_a_namespaced_install_that_may_not_read_crds_starts_with_a_warning(forbidden, caplog):
    assert kuberay_problem(forbidden) is None
    assert "HTTP 403" in caplog.text and "HeadUnauthenticated" in caplog.text


def test_another_error_reading_the_crd_refuses_the_start(failing):
    problem = kuberay_problem(failing)
    assert problem is not None and "HTTP 500" in problem
