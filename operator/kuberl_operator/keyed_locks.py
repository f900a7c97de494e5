"""One lock per key (a job's namespace/name), kept only while someone holds or waits for it.

A ``defaultdict(threading.Lock)`` keeps a lock for every job the operator ever reconciled; with
jobs created and deleted all day that map only grows. Here each key's lock is counted by its
users and dropped by the last one out, so memory follows the reconciles in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class KeyedLocks:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold ``key``'s lock: callers with the same key run one at a time."""
        with self._guard:
            lock, users = self._locks.get(key) or (threading.Lock(), 0)
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        """Keys with a holder or a waiter now."""
        with self._guard:
            return len(self._locks)
