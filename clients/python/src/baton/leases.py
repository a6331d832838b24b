"""The worker's one renewal loop: every held lease is renewed about a third of the way through, all
that are due in one batch request (POST /v1/jobs/renew), carrying each job's latest unsent
progress report. A lease a renewal finds lost tells its handler to stop.

No renewal may land after its job's ack (the server would answer lease_lost, and the worker would
log a lost lease for a job it completed): release() takes a job out of the set and waits for any
renewal request in flight that carries it, before the ack is sent."""

from __future__ import annotations

import random
import threading
import time
from typing import Callable, Dict, List, Set

from .errors import BatonError
from .events import Log
from .job import Job
from .transport import Aborted, Transport

MAX_BATCH = 1000  # BatchRenewRequest.renewals


class Leases:
    def __init__(self, transport: Transport, lease_ms: int, log: Log, on_lost: Callable[[Job, str], None]) -> None:
        self.transport = transport
        self.lease_ms = lease_ms
        self.log = log
        self.on_lost = on_lost
        self._held: Dict[str, Job] = {}
        self._in_flight: Set[str] = set()
        self._changed = threading.Condition()
        self._closed = False
        self._failures = 0
        self._thread = threading.Thread(target=self._loop, name="baton-renewer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join(timeout=10)

    def add(self, job: Job) -> None:
        # No notify: a new lease is due last (a third of the lease from now), and the loop never
        # sleeps longer than a sixth of a lease (waking the loop for every job costs a busy worker).
        with self._changed:
            self._held[job.id] = job

    def held(self) -> List[Job]:
        with self._changed:
            return list(self._held.values())

    def release(self, job: Job) -> None:
        """Stop renewing the job, and return once no renewal request carrying it is in flight."""
        with self._changed:
            self._held.pop(job.id, None)
            while job.id in self._in_flight:
                self._changed.wait()

    def bring_forward(self, job: Job) -> None:
        """A progress report: renew within a second (the report goes with it)."""
        with self._changed:
            soon = time.monotonic() + 1
            if job._renew_at > soon:
                job._renew_at = soon
                self._changed.notify_all()

    def _loop(self) -> None:
        while True:
            with self._changed:
                if self._closed:
                    return
                now = time.monotonic()
                # What is due, and what would be due within a sixth of the lease: one request for both.
                horizon = now + self.lease_ms / 6000
                due = [job for job in self._held.values() if job._renew_at <= now]
                if due:
                    due = [job for job in self._held.values() if job._renew_at <= horizon][:MAX_BATCH]
                    self._in_flight.update(job.id for job in due)
                else:
                    next_at = min((job._renew_at for job in self._held.values()), default=now + 1)
                    longest = min(1.0, self.lease_ms / 6000)
                    self._changed.wait(timeout=min(max(next_at - now, 0.01), longest))
                    continue
            try:
                self._renew(due, now)
            finally:
                with self._changed:
                    self._in_flight.difference_update(job.id for job in due)
                    self._changed.notify_all()

    def _renew(self, due: List[Job], sent_at: float, with_progress: bool = True) -> None:
        renewals, reports = [], {}
        for job in due:
            renewal = {"id": job.id, "lease_token": job.lease_token, "lease_ms": self.lease_ms}
            report = job.unsent_progress() if with_progress else None
            if report is not None:
                reports[job.id] = report[0]
                renewal["progress"] = report[1]
            renewals.append(renewal)
        # A renewal is not retried in place: it would hold up the acks of its jobs (release waits
        # for it). It is tried again soon instead, by this loop, while the leases last.
        timeout = max(2.0, min(10.0, self.lease_ms / 3000))
        try:
            answer = self.transport.request("POST", "/v1/jobs/renew", {"renewals": renewals}, timeout=timeout)
        except (BatonError, Aborted) as error:
            status = getattr(error, "status", None)
            if reports and isinstance(error, BatonError) and status in (400, 413):
                # A report Baton refuses must not cost the leases: renew again without reports.
                for job in due:
                    if job.id in reports:
                        job.progress_sent(reports[job.id])
                self._renew(due, sent_at, with_progress=False)
                return
            self._failures += 1
            retry_after = getattr(error, "retry_after", None)
            pause = retry_after if retry_after is not None else min(0.1 * 2**self._failures, 5.0)
            pause = min(pause * random.uniform(0.5, 1.0), self.lease_ms / 10000)
            self.log(
                "warning",
                "renew_failed",
                {"ids": [job.id for job in due], "reason": str(error), "wait_s": round(pause, 3)},
            )
            for job in due:
                job._renew_at = time.monotonic() + pause
            return
        self._failures = 0
        by_id = {job.id: job for job in due}
        for item in answer["results"]:
            job = by_id.get(item["id"])
            if job is None:
                continue
            if item["outcome"] == "renewed":
                lease_s = item.get("lease_ms", self.lease_ms) / 1000
                job._expires = sent_at + lease_s
                job._renew_at = sent_at + lease_s / 3
                if job.id in reports:
                    job.progress_sent(reports[job.id])
                if job.unsent_progress() is not None:  # reported while this renewal was on its way
                    job._renew_at = min(job._renew_at, time.monotonic() + 1)
            else:
                with self._changed:
                    self._held.pop(job.id, None)
                self.on_lost(job, item["outcome"])
