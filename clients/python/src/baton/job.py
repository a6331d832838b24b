"""A claimed job as a handler sees it: its fields, progress reports, and whether its lease is lost."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, List, Optional

from .errors import LeaseLost
from .schema import ClaimedJob
from .transport import encode

PROGRESS_MAX_BYTES = 4096  # what Baton keeps of a progress report (BatchRenewItem.progress)

# A job's life in the worker: held (claimed, running) -> settling (its ack or nack is on its way),
# or held -> gone (its lease was lost, or it was given back while stopping). The renewer, the slot
# running the job and the shutdown each move it, under the job's lock, so exactly one of them wins.
HELD, SETTLING, GONE = "held", "settling", "gone"


class Job:
    """A claimed job, handed to the handler.

    Fields as claimed (ClaimedJob): id, queue, group, payload, priority, attempt (1 on the first
    claim), max_attempts, lease_token, deadline_at, run_at, created_at, traceparent, tracestate;
    `raw` is the whole claimed object.

    lease_lost: a threading.Event set when this worker no longer holds the lease: a renewal found it
        lost (expired and re-armed, cancelled), or the worker gave the job back while stopping.
        Whatever the handler returns then is dropped. A long handler checks it between steps
        (`job.raise_if_lost()`), or waits on it instead of sleeping (`job.lease_lost.wait(5)`).
    """

    def __init__(self, claimed: ClaimedJob, lease_ms: int, on_progress: Callable[[Job], None]) -> None:
        self.raw = claimed
        self.id: str = claimed["id"]
        self.queue: str = claimed["queue"]
        self.group: Optional[str] = claimed.get("group")
        self.payload: Any = claimed["payload"]
        self.priority: int = claimed.get("priority", 0)
        self.attempt: int = claimed["attempt"]
        self.max_attempts: int = claimed["max_attempts"]
        self.lease_token: str = claimed["lease_token"]
        self.deadline_at: Optional[str] = claimed.get("deadline_at")
        self.run_at: Optional[str] = claimed.get("run_at")
        self.created_at: Optional[str] = claimed.get("created_at")
        self.traceparent: Optional[str] = claimed.get("traceparent")
        self.tracestate: Optional[str] = claimed.get("tracestate")
        self.lease_lost = threading.Event()

        self._lock = threading.Lock()
        self._state = HELD
        self._given_back = False
        self._on_lost: List[Callable[[], None]] = []
        self._on_progress = on_progress
        now = time.monotonic()
        self._expires = now + lease_ms / 1000  # by our clock: the lease is surely gone after it
        self._renew_at = now + lease_ms / 3000
        self._progress: Any = None
        self._reported = 0  # progress reports made; the renewals carried the first `_sent` of them
        self._sent = 0

    def __repr__(self) -> str:
        return f"<baton.Job {self.id} of {self.queue!r}, attempt {self.attempt}>"

    # --- For handlers ------------------------------------------------------------------------

    def progress(self, value: Any) -> None:
        """Say how far the job got (any JSON value up to 4096 bytes): the latest report goes out with
        the lease's next renewal, brought forward to within a second, and the job's ack carries the
        last one, so the completed job keeps it (GET /v1/jobs/{id}: progress). Raises ValueError
        when the value is not JSON or too large, here, where the handler can see why."""
        size = len(encode(value))
        if size > PROGRESS_MAX_BYTES:
            raise ValueError(f"progress is {size} bytes of JSON; Baton keeps at most {PROGRESS_MAX_BYTES}")
        with self._lock:
            self._progress = value
            self._reported += 1
        self._on_progress(self)

    def raise_if_lost(self) -> None:
        """Raise LeaseLost when the lease is gone (see lease_lost): a handler calls it between steps."""
        if self.lease_lost.is_set():
            raise LeaseLost(f"the lease of job {self.id} (attempt {self.attempt}) is lost")

    # --- For the worker ----------------------------------------------------------------------

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Run callback (from another thread) when the lease is lost; at once if it already is. The
        worker cancels an async handler's task this way, the command runner kills its process."""
        with self._lock:
            if self._state != GONE:
                self._on_lost.append(callback)
                return
        callback()

    def reported(self) -> bool:
        with self._lock:
            return self._reported > 0

    def latest_progress(self) -> Any:
        with self._lock:
            return self._progress

    def unsent_progress(self) -> Optional[tuple]:
        """(report number, value) of a report no renewal carried yet, else None."""
        with self._lock:
            return (self._reported, self._progress) if self._reported > self._sent else None

    def progress_sent(self, number: int) -> None:
        with self._lock:
            self._sent = max(self._sent, number)

    def start_settling(self) -> bool:
        """held -> settling; False when the job is gone (lost or given back)."""
        with self._lock:
            if self._state != HELD:
                return False
            self._state = SETTLING
            return True

    def lose(self, given_back: bool = False) -> bool:
        """held -> gone: the handler is told to stop. False when the job was settling or gone."""
        with self._lock:
            if self._state != HELD:
                return False
            self._state = GONE
            self._given_back = given_back
            callbacks, self._on_lost = self._on_lost, []
        self.lease_lost.set()
        for callback in callbacks:
            try:
                callback()
            except Exception:  # noqa: BLE001 - a failing hook must not stop the others
                pass
        return True

    @property
    def given_back(self) -> bool:
        return self._given_back
