"""informer.py against a scripted API: list, follow the watch, re-list after 410 Gone, and the
operator's own writes held at once (no cluster: the lister is a fake that records its calls)."""

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from kuberl_operator.cached_kube import trim_pod
from kuberl_operator.informer import Informer


class _Response:
    def __init__(self, body: Any, lines: list[dict[str, Any]] | None = None) -> None:
        self.data = json.dumps(body).encode()
        self.lines = lines or []

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        for line in self.lines:
            yield (json.dumps(line) + "\n").encode()

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def _pod(name: str, cluster: str, version: str, phase: str = "Pending") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name, "namespace": "ns", "resourceVersion": version,
            "labels": {"ray.io/cluster": cluster, "kuberl.io/job": "j"},
            "managedFields": [{"manager": "x"}],
        },
        "spec": {"containers": [{"name": "ray-head", "image": "big"}]},
        "status": {"phase": phase, "hostIP": "10.0.0.1"},
    }  # fmt: skip


class ScriptedApi:
    """Each call answers the next scripted response; a call past the script blocks (an idle
    watch) until the test ends."""

    def __init__(self, script: list[_Response]) -> None:
        self.script = script
        self.calls: list[dict[str, Any]] = []
        self.idle = threading.Event()

    def __call__(self, **kwargs: Any) -> _Response:
        self.calls.append(kwargs)
        if not self.script:
            self.idle.wait(30)
            return _Response({}, [])
        return self.script.pop(0)


def _wait(predicate: Any) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_list_watch_and_relist_after_gone():
    pods = [_pod("h1", "c1", "5"), _pod("w1", "c1", "6"), _pod("h2", "c2", "7")]
    first = {"metadata": {"resourceVersion": "10"}, "items": pods}
    watch = [
        {"type": "MODIFIED", "object": _pod("w1", "c2", "11", "Running")},  # moved to c2
        {"type": "DELETED", "object": _pod("h2", "c2", "12")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}},
        {"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}},
    ]
    relisted = {"metadata": {"resourceVersion": "20"}, "items": [_pod("h3", "c3", "19")]}
    api = ScriptedApi([_Response(first), _Response({}, watch), _Response(relisted)])
    informer = Informer("pods", api, "kuberl.io/job", "ray.io/cluster", trim_pod)
    informer.start()
    try:
        _wait(lambda: informer.get("ns", "h3") is not None)
        assert informer.get("ns", "h1") is None and len(informer) == 1  # the relist replaced all
        assert [p["metadata"]["name"] for p in informer.by_label("ns", "c3")] == ["h3"]
        _wait(lambda: len(api.calls) == 4)  # the watch resumed from the relist's version
    finally:
        informer.stop()
        api.idle.set()
    assert [c.get("watch", False) for c in api.calls] == [False, True, False, True]
    assert api.calls[1]["resource_version"] == "10" and api.calls[3]["resource_version"] == "20"
    assert all(c["label_selector"] == "kuberl.io/job" for c in api.calls)


def test_events_move_objects_between_labels_and_trim_them():
    pods = [_pod("h1", "c1", "5"), _pod("w1", "c1", "6")]
    first = {"metadata": {"resourceVersion": "10"}, "items": pods}
    watch = [{"type": "MODIFIED", "object": _pod("w1", "c2", "11", "Running")},
             {"type": "DELETED", "object": _pod("h1", "c1", "12")}]  # fmt: skip
    api = ScriptedApi([_Response(first), _Response({}, watch)])
    informer = Informer("pods", api, "kuberl.io/job", "ray.io/cluster", trim_pod)
    informer.start()
    try:
        _wait(lambda: informer.get("ns", "h1") is None and informer.synced.is_set())
        assert informer.by_label("ns", "c1") == []
        [moved] = informer.by_label("ns", "c2")
        assert moved["status"] == {"phase": "Running", "hostIP": "10.0.0.1"}
        assert "spec" not in moved and "managedFields" not in moved["metadata"]
        # the operator's own writes are held before any watch event echoes them
        informer.put(_pod("n1", "c9", "30"))
        assert [p["metadata"]["name"] for p in informer.by_label("ns", "c9")] == ["n1"]
        informer.drop("ns", "n1")
        assert informer.get("ns", "n1") is None and informer.by_label("ns", "c9") == []
    finally:
        informer.stop()
        api.idle.set()
