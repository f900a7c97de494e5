"""A small client for the Ray Jobs REST API on a cluster's dashboard (port 8265).

Only what the operator needs: submit, status, stop, logs and version. Failures to reach the
dashboard raise ``DashboardUnavailable``; an unknown job is ``None``, not an error.
"""

import json
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
_ID_IN_USE = "Please use a different submission_id"


class DashboardUnavailable(RuntimeError):
    """The dashboard did not answer, or answered with a server error."""


class SubmissionRejected(RuntimeError):
    """The Jobs API refused the submission for a reason other than a reused id."""


@dataclass(frozen=True)
class JobInfo:
    submission_id: str
    status: str
    message: str
    error_type: str | None
    driver_exit_code: int | None
    start_time: int | None
    end_time: int | None
    metadata: dict[str, str]

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def from_api(cls, body: dict[str, Any]) -> "JobInfo":
        return cls(
            submission_id=body.get("submission_id") or body.get("job_id") or "",
            status=body.get("status") or "PENDING",
            message=body.get("message") or "",
            error_type=body.get("error_type"),
            driver_exit_code=body.get("driver_exit_code"),
            start_time=body.get("start_time"),
            end_time=body.get("end_time"),
            metadata=body.get("metadata") or {},
        )


class RayJobsClient:
    def __init__(self, base_url: str, timeout: float = 10.0, token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.token = token

    def _request(
        self, method: str, path: str, body: dict | None = None, timeout: float | None = None
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("x-ray-authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                return response.status, _decode(response.read())
        except urllib.error.HTTPError as err:
            return err.code, _decode(err.read())
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            raise DashboardUnavailable(f"{method} {path}: {err}") from err

    def version(self) -> dict[str, Any]:
        status, body = self._request("GET", "/api/version")
        if status != 200 or not isinstance(body, dict):
            raise DashboardUnavailable(f"GET /api/version: HTTP {status}")
        return body

    def session_name(self) -> str | None:
        return self.version().get("session_name")

    def submit(self, payload: dict[str, Any]) -> str:
        """Submit; a reused submission id counts as already submitted (idempotent)."""
        # The head answers only once the job's supervisor actor exists: seconds on a busy head.
        status, body = self._request("POST", "/api/jobs/", payload, timeout=max(self.timeout, 60))
        if status == 200 and isinstance(body, dict):
            return body.get("submission_id") or payload["submission_id"]
        text = body if isinstance(body, str) else json.dumps(body)
        if _ID_IN_USE in text:
            return payload["submission_id"]
        if status >= 500:
            raise DashboardUnavailable(f"POST /api/jobs/: HTTP {status}: {text[:300]}")
        raise SubmissionRejected(f"HTTP {status}: {text[:300]}")

    def get(self, submission_id: str) -> JobInfo | None:
        status, body = self._request("GET", f"/api/jobs/{submission_id}")
        if status == 404:
            return None
        if status != 200 or not isinstance(body, dict):
            raise DashboardUnavailable(f"GET /api/jobs/{submission_id}: HTTP {status}")
        return JobInfo.from_api(body)

    def stop(self, submission_id: str) -> bool:
        status, body = self._request("POST", f"/api/jobs/{submission_id}/stop")
        if status == 404:
            return False
        if status != 200:
            raise DashboardUnavailable(f"POST /api/jobs/{submission_id}/stop: HTTP {status}")
        return bool(isinstance(body, dict) and body.get("stopped"))

    def logs_tail(self, submission_id: str, max_chars: int = 2000) -> str:
        status, body = self._request("GET", f"/api/jobs/{submission_id}/logs")
        if status != 200 or not isinstance(body, dict):
            return ""
        return (body.get("logs") or "")[-max_chars:]


def _decode(raw: bytes) -> Any:
    text = raw.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
