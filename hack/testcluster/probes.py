"""Readiness probes: poll an HTTP(S) endpoint until it answers, failing fast if its process died."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testcluster.processes import is_running
from testcluster.state import ProcessRecord


class ComponentFailedError(RuntimeError):
    """A component exited or never became ready; the message names it and its log."""


@dataclass(frozen=True)
class ApiClient:
    """Just enough of a client to probe the apiserver without third-party packages."""

    server: str
    token: str
    ca_cert: Path

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        request = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self.token}"}
        )
        return _fetch(request, context, timeout)

    def get_json(self, path: str) -> dict[str, object] | None:
        status, body = self.get(path)
        return json.loads(body) if status == 200 else None


def _fetch(
    request: urllib.request.Request, context: ssl.SSLContext | None, timeout: float
) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


def http_ok(url: str) -> bool:
    """GET `url`; true on 200. The kube-* components serve self-signed certs, hence no verify."""
    context = ssl._create_unverified_context() if url.startswith("https") else None
    status, _ = _fetch(urllib.request.Request(url), context, timeout=2.0)
    return status == 200


def wait_until(
    description: str,
    check: Callable[[], bool],
    process: ProcessRecord | None,
    timeout: float,
    interval: float = 0.1,
) -> None:
    """Poll `check` until true; raise early if `process` exits, or after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if process is not None and not is_running(process):
            raise ComponentFailedError(f"{process.name} exited while waiting for {description}")
        if time.monotonic() > deadline:
            raise ComponentFailedError(f"timed out after {timeout:.0f}s waiting for {description}")
        time.sleep(interval)
