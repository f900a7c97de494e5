"""The judge's OpenAI-compatible endpoint: `POST /v1/chat/completions` on 127.0.0.1.

Each request is queued with a future and answered when the batcher (`judge.JudgeService`) has
run it; the reply is a `chat.completion` object as OpenAI's client and verl's examples read it
(`choices[0].message.content`). Only one completion per request (`n` 1) is served.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)

PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, Any]]
    body: dict[str, Any] = field(default_factory=dict)


class JudgeServer:
    """A threaded HTTP server feeding `pending`; `address` is host:port, as verl passes it."""

    def __init__(self, pending: queue.Queue[tuple[ChatRequest, Future[str]]]) -> None:
        handler = type("JudgeHandler", (_Handler,), {"pending": pending})
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name="judge-http", daemon=True
        )
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"{host}:{port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A reward pass opens one connection per response at once; the default backlog (5) would
    # reset the ones beyond it.
    request_queue_size = 4096


class _Handler(BaseHTTPRequestHandler):
    pending: queue.Queue[tuple[ChatRequest, Future[str]]]

    def do_POST(self) -> None:
        if self.path.rstrip("/") != PATH:
            self._reply(404, {"error": {"message": f"only POST {PATH} is served"}})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            request = _chat_request(body)
        except (ValueError, TypeError) as err:
            self._reply(400, {"error": {"message": str(err)}})
            return
        future: Future[str] = Future()
        self.pending.put((request, future))
        try:
            text = future.result()
        except Exception as err:
            self._reply(500, {"error": {"message": f"the judge engine failed: {err!r}"}})
            return
        self._reply(200, completion(text, str(body.get("model", ""))))

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug(format, *args)


def _chat_request(body: Any) -> ChatRequest:
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise ValueError("the request body must be a JSON object with a 'messages' list")
    if body.get("n", 1) != 1:
        raise ValueError(f"n is {body['n']!r}: the judge serves one completion per request")
    return ChatRequest(messages=body["messages"], body=body)


def completion(text: str, model: str) -> dict[str, Any]:
    """An OpenAI `chat.completion` object holding `text`."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }
