"""Nothing a Ray head answers can grow the operator's memory: a huge driver log is streamed
keeping only its tail, a huge JSON answer is refused, and what reaches status is redacted."""

import json
import threading
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kuberl_operator.ray_jobs import MAX_BODY_BYTES, DashboardUnavailable, JobInfo, RayJobsClient
from kuberl_operator.redact import MASK, redact

LOG_BYTES = 128 << 20
LINE = 'step 17: loss=0.25 caf\u00e9 \\ path\\to "quoted"\n'
LAST = "Traceback: RuntimeError boom HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 done\n"
PEAK_BUDGET = 8 << 20  # bytes traced while reading; the log alone is 128 MiB


class HugeHead(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.endswith("/logs"):
            self._stream_log()
        elif self.path.startswith("/api/jobs/"):
            self._stream([b'{"status": "RUNNING", "message": "'], b"x" * (1 << 20), 64, [b'"}'])
        else:
            self._send(b'{"session_name": "session_1"}')

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, head: list[bytes], block: bytes, count: int, tail: list[bytes]) -> None:
        """Head, ``count`` times one block, tail: a big body from a 1 MiB buffer (this server
        runs in the test's process, so its allocations are traced too)."""
        size = sum(map(len, head + tail)) + len(block) * count
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        try:
            for part in head:
                self.wfile.write(part)
            for _ in range(count):
                self.wfile.write(block)
            for part in tail:
                self.wfile.write(part)
        except ConnectionError:
            pass  # the client stopped reading: what a capped read does

    def _stream_log(self) -> None:
        line = json.dumps(LINE)[1:-1].encode()
        block = line * ((1 << 20) // len(line))
        last = json.dumps(LAST)[1:-1].encode()
        self._stream([b'{"logs": "'], block, LOG_BYTES // len(block), [last, b'"}'])


@pytest.fixture
def head() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HugeHead)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _peak(call):  # type: ignore[no-untyped-def]
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_log_is_streamed_and_only_its_redacted_tail_kept(head: str) -> None:
    client = RayJobsClient(head, token="t", timeout=30)
    tail, peak = _peak(lambda: client.logs_tail("grpo-1", max_chars=2000))
    assert peak < PEAK_BUDGET, f"reading a {LOG_BYTES >> 20} MiB log traced {peak >> 20} MiB"
    assert len(tail) <= 2000
    assert tail.endswith(f"HF_TOKEN={MASK} done\n")
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in tail
    assert LINE in tail  # escapes decoded: é, backslashes, quotes


def test_a_huge_json_answer_is_refused_not_buffered(head: str) -> None:
    client = RayJobsClient(head, token="t", timeout=30)

    def get() -> None:
        with pytest.raises(DashboardUnavailable, match=f"over {MAX_BODY_BYTES} bytes"):
            client.get("grpo-1")

    _, peak = _peak(get)
    assert peak < PEAK_BUDGET


def test_short_logs_come_back_whole() -> None:
    from kuberl_operator.ray_jobs import _logs_from_tail

    body = json.dumps({"logs": "one\ntwo\n"}).encode()
    assert _logs_from_tail(body, complete=True) == "one\ntwo\n"
    # A cut inside an escape sequence and inside the first line: both dropped.
    assert _logs_from_tail(body[12:], complete=False) == "two\n"


def test_job_messages_are_redacted_and_capped() -> None:
    info = JobInfo.from_api(
        {"status": "FAILED", "message": "auth: Bearer abcdefghijkl1234 " + "y" * 10_000}
    )
    assert "abcdefghijkl1234" not in info.message
    assert len(info.message) <= 2000


@pytest.mark.parametrize(
    "secret",
    [
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
        "WANDB_API_KEY=0123456789abcdef0123",
        '{"password": "hunter2hunter2"}',
        "aws AKIAIOSFODNN7EXAMPLE key",
        "token ghp_abcdefghijklmnopqrstuvwxyz012345",
        "OPENAI sk-abcdefghijklmnopqrstuvwxyz",
    ],
)
def test_redaction_masks_common_secret_shapes(secret: str) -> None:
    masked = redact(secret)
    assert MASK in masked
    for word in ("eyJzdWIiOiIx", "0123456789abcdef0123", "hunter2", "AKIAIOSFODNN7", "ghp_a",
                 "sk-abcdef"):  # fmt: skip
        assert word not in masked
    assert redact("loss=0.25 step=3 token count 12") == "loss=0.25 step=3 token count 12"
