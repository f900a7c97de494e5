"""A small client for the Ray Jobs REST API on a cluster's dashboard (port 8265).

Only what the operator needs: submit, status, stop, logs and version. Failures to reach the
dashboard raise ``DashboardUnavailable``; an unknown job is ``None``, not an error.

A head runs the job's code, so nothing it answers is trusted: every body is read with a size
cap (``MAX_BODY_BYTES``; a larger one is refused), the log is streamed keeping only its last
bytes (never the whole log in memory), and messages are redacted before they reach status.
Every request carries the head's token (``x-ray-authorization: Bearer``, Ray's token auth),
has one deadline for the whole call (http_deadline.py: a head dripping bytes cannot hold a
thread past it) and follows no redirect (the token goes to the head's address only).
"""

import http.client
import json
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from kuberl_operator.http_deadline import open_with_deadline
from kuberl_operator.redact import redact

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
"""The largest JSON answer read from a head; more is refused (a job's status is a few KiB)."""
MAX_MESSAGE_CHARS = 2000
MAX_LOG_STREAM_BYTES = 1 << 30
"""How much of a log is streamed past before giving up on reaching its end."""
LOG_STREAM_SECONDS = 60.0
_CHUNK = 64 << 10

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
            message=redact(str(body.get("message") or ""))[-MAX_MESSAGE_CHARS:],
            error_type=body.get("error_type"),
            driver_exit_code=body.get("driver_exit_code"),
            start_time=body.get("start_time"),
            end_time=body.get("end_time"),
            metadata=body.get("metadata") or {},
        )


class RayJobsClient:
    def __init__(self, base_url: str, token: str | None = None, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.token = token

    def _open(
        self, method: str, path: str, body: dict | None, timeout: float | None, auth: bool = True
    ) -> tuple[http.client.HTTPResponse, http.client.HTTPConnection]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if self.token and auth:
            headers["x-ray-authorization"] = f"Bearer {self.token}"
        url = self.base_url + path
        try:
            return open_with_deadline(url, method, data, headers, timeout or self.timeout)
        except (OSError, http.client.HTTPException) as err:
            raise _unavailable(method, path, err) from err

    def _request(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        timeout: float | None = None,
        auth: bool = True,
    ) -> tuple[int, Any]:
        response, connection = self._open(method, path, body, timeout, auth)
        try:
            raw = response.read(MAX_BODY_BYTES + 1)
        except (OSError, http.client.HTTPException) as err:
            raise _unavailable(method, path, err) from err
        finally:
            connection.close()
        if len(raw) > MAX_BODY_BYTES:
            raise DashboardUnavailable(f"{method} {path}: answer over {MAX_BODY_BYTES} bytes")
        if auth and response.status in (401, 403):
            refused = f"HTTP {response.status}: the head refused the operator's token"
            raise DashboardUnavailable(f"{method} {path}: {refused}")
        return response.status, _decode(raw)

    def refuses_anonymous(self) -> bool:
        """Whether the head refuses a Jobs API request that carries no token (401/403), as a
        head locked by Ray's token authentication does; False when it answers one."""
        status, _ = self._request("GET", "/api/version", auth=False)
        if status in (401, 403):
            return True
        if status == 200:
            return False
        raise DashboardUnavailable(f"GET /api/version without a token: HTTP {status}")

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
            raise DashboardUnavailable(redact(f"POST /api/jobs/: HTTP {status}: {text[:300]}"))
        raise SubmissionRejected(redact(f"HTTP {status}: {text[:300]}"))

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
        """The last ``max_chars`` of the driver log, redacted; read by streaming, so memory
        stays flat whatever the log's size (the whole log is the runtime's own
        ``logs/attempt-N/driver.log``)."""
        path = f"/api/jobs/{submission_id}/logs"
        try:
            response, connection = self._open("GET", path, None, LOG_STREAM_SECONDS + 5)
            try:
                if response.status != 200:
                    return ""
                raw, complete = _stream_tail(response, max_chars * 6 + 64)
            finally:
                connection.close()
        except (DashboardUnavailable, OSError, http.client.HTTPException) as err:
            log.warning("could not read the log of %s: %s", submission_id, redact(str(err)))
            return ""
        text = _logs_from_tail(raw, complete)
        return redact(text)[-max_chars:]


def _unavailable(method: str, path: str, err: BaseException) -> DashboardUnavailable:
    what = str(err) or type(err).__name__
    return DashboardUnavailable(redact(f"{method} {path}: {what}"))


def _stream_tail(response: Any, keep: int) -> tuple[bytes, bool]:
    """The last ``keep`` bytes of a body (all of it when shorter); False when cut short."""
    chunks: deque[bytes] = deque()
    kept = total = 0
    deadline = time.monotonic() + LOG_STREAM_SECONDS
    while chunk := response.read(_CHUNK):
        chunks.append(chunk)
        kept += len(chunk)
        total += len(chunk)
        while chunks and kept - len(chunks[0]) >= keep:
            kept -= len(chunks.popleft())
        if total >= MAX_LOG_STREAM_BYTES or time.monotonic() > deadline:
            return b"".join(chunks)[-keep:], False
    whole = b"".join(chunks)
    return whole[-keep:], total == len(whole) and total <= keep


def _logs_from_tail(raw: bytes, complete: bool) -> str:
    """The text of ``{"logs": "..."}`` given the whole body or only its last bytes."""
    text = raw.decode("utf-8", errors="replace")
    if complete:
        body = _decode(raw)
        return str(body.get("logs") or "") if isinstance(body, dict) else ""
    end = text.rfind('"')
    fragment = text[:end] if end >= 0 else text
    for skip in range(min(len(fragment), 12) + 1):  # the cut may fall inside an escape
        try:
            decoded = json.loads('"' + fragment[skip:] + '"')
        except ValueError:
            continue
        first_break = decoded.find("\n")
        return decoded[first_break + 1 :] if first_break >= 0 else decoded
    return ""


def _decode(raw: bytes) -> Any:
    text = raw.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
