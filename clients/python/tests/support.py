"""What the library's Python tests share. They run against a real Baton that the vitest file
(clients/python/test/*.test.ts) started: BATON_URL, and a key per scope in BATON_ADMIN_KEY,
BATON_PRODUCER_KEY and BATON_CONSUMER_KEY."""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Tuple

from baton import Client, Worker

URL = os.environ["BATON_URL"]
ADMIN = Client(URL, os.environ["BATON_ADMIN_KEY"])
PRODUCER_KEY = os.environ["BATON_PRODUCER_KEY"]
PRODUCER = Client(URL, PRODUCER_KEY)
CONSUMER_KEY = os.environ["BATON_CONSUMER_KEY"]


def queue_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def until(condition: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout} s")
        time.sleep(0.02)


class Events:
    """A log hook keeping every event, for assertions on what the worker said."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: List[Tuple[str, str, Dict[str, Any]]] = []

    def __call__(self, level: str, event: str, fields: Dict[str, Any]) -> None:
        with self.lock:
            self.items.append((level, event, dict(fields)))

    def named(self, event: str) -> List[Dict[str, Any]]:
        with self.lock:
            return [fields for _, name, fields in self.items if name == event]


class Running:
    """A Worker run on a thread for the length of a `with` block; stopped and joined at its end."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)

    def __enter__(self) -> Worker:
        self.thread.start()
        return self.worker

    def __exit__(self, *_: object) -> None:
        self.worker.stop()
        self.thread.join(timeout=60)
        if self.thread.is_alive():
            raise AssertionError("the worker did not stop within 60 s")


def worker(queue: str, events: Events, **options: Any) -> Worker:
    """A worker with the consumer key, a short long-poll, and events kept."""
    options.setdefault("wait_ms", 1000)
    return Worker(queue, client=Client(URL, CONSUMER_KEY, log=events), log=events, **options)
