"""Objects kept in memory by one LIST and then a WATCH: what a reconcile reads instead of asking.

A reconcile used to LIST an attempt's pods (and the job's RayClusters) by label: one request, but
the API server scans the whole namespace for it, so with N jobs polled every few seconds its work
grew as N². An ``Informer`` lists a resource once (label-selected on the server, so it sees only
kuberl's objects), then follows a WATCH from that list's resourceVersion, and answers ``get`` and
``by_label`` from memory: a reconcile's reads cost no request and O(its own objects) work.

Objects are kept trimmed (``trim``): managedFields and whatever a reconcile never reads are
dropped, so memory grows with kuberl's objects by what the operator needs of them. A watch that
expires (410 Gone) or breaks is re-listed; the objects held meanwhile stay readable (a list
replaces them at once). ``put`` and ``drop`` write the operator's own creations and deletions
through at once, so its next reconcile never waits for the watch to echo them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kubernetes.watch.watch import iter_resp_lines

log = logging.getLogger(__name__)

Key = tuple[str, str]
"""(namespace, name)"""
Lister = Callable[..., Any]
"""A kubernetes-client list call taking label_selector, watch, resource_version, ...; returns a
raw urllib3 response with ``_preload_content=False``."""
Trim = Callable[[dict[str, Any]], dict[str, Any]]

WATCH_SECONDS = 300
RETRY_SECONDS = 2.0


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in obj.get("metadata", {}).items() if k != "managedFields"}
    return {**obj, "metadata": metadata}


class Informer:
    """One resource's label-selected objects, kept by watch events (one thread per informer)."""

    def __init__(
        self,
        what: str,
        lister: Lister,
        label_selector: str,
        index_label: str,
        trim: Trim = without_managed_fields,
    ) -> None:
        self.what = what
        self.lister = lister
        self.label_selector = label_selector
        self.index_label = index_label
        self.trim = trim
        self.synced = threading.Event()
        self._objects: dict[Key, dict[str, Any]] = {}
        self._index: defaultdict[Key, set[str]] = defaultdict(set)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{what}", daemon=True)

    # --- reads -----------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def by_label(self, namespace: str, value: str) -> list[dict[str, Any]]:
        """Objects of ``namespace`` whose ``index_label`` is ``value``."""
        with self._lock:
            names = sorted(self._index.get((namespace, value), ()))
            return [self._objects[(namespace, n)] for n in names]

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    # --- writes ----------------------------------------------------------------------------

    def put(self, obj: dict[str, Any]) -> None:
        """Hold ``obj`` now (the API server's answer to the operator's own create)."""
        with self._lock:
            self._store(self.trim(obj))

    def drop(self, namespace: str, name: str) -> None:
        with self._lock:
            self._remove((namespace, name))

    def _store(self, obj: dict[str, Any]) -> None:
        metadata = obj["metadata"]
        key = (metadata.get("namespace", ""), metadata["name"])
        self._remove(key)
        self._objects[key] = obj
        if (value := (metadata.get("labels") or {}).get(self.index_label)) is not None:
            self._index[(key[0], value)].add(key[1])

    def _remove(self, key: Key) -> None:
        old = self._objects.pop(key, None)
        if old is None:
            return
        value = (old["metadata"].get("labels") or {}).get(self.index_label)
        names = self._index.get((key[0], value))
        if names is not None:
            names.discard(key[1])
            if not names:
                del self._index[(key[0], value)]

    # --- the list-then-watch loop ----------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()  # urllib3 2: unblocks the thread reading the stream

    def _run(self) -> None:
        version: str | None = None
        while not self._stopping.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._follow(version)
            except Exception as err:  # a broken stream, 410 Gone, the API server restarting
                gone = getattr(err, "status", None) == 410
                log.log(
                    logging.INFO if gone else logging.WARNING,
                    "%s informer: %s; listing again",
                    *(self.what, "watch expired" if gone else err),
                )
                version = None
                self._stopping.wait(0 if gone else RETRY_SECONDS)

    def _list(self) -> str:
        response = self.lister(label_selector=self.label_selector, _preload_content=False)
        listed = json.loads(response.data)
        objects = [self.trim(item) for item in listed.get("items") or []]
        with self._lock:
            self._objects.clear()
            self._index.clear()
            for obj in objects:
                self._store(obj)
        self.synced.set()
        log.info("%s informer: %d listed", self.what, len(objects))
        return str(listed["metadata"]["resourceVersion"])

    def _follow(self, version: str) -> str:
        response = self.lister(
            label_selector=self.label_selector,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
        )
        self._response = response
        try:
            for line in iter_resp_lines(response):
                if line.strip():
                    version = self._apply(json.loads(line), version)
                if self._stopping.is_set():
                    break
        finally:
            self._response = None
            response.close()
            response.release_conn()
        return version

    def _apply(self, event: dict[str, Any], version: str) -> str:
        """One watch event; returns the resourceVersion to resume from."""
        obj = event["object"]
        if event["type"] == "ERROR":  # 410 Gone: the version is too old; list again
            raise WatchError(obj.get("code"), obj.get("message", ""))
        version = obj.get("metadata", {}).get("resourceVersion") or version
        if event["type"] != "BOOKMARK":
            with self._lock:
                if event["type"] == "DELETED":
                    self._remove((obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
                else:
                    self._store(self.trim(obj))
        return version


class WatchError(RuntimeError):
    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(f"watch error {status}: {message}")
        self.status = status
