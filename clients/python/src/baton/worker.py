"""The worker runtime: the user writes a handler, the worker claims, runs, renews and settles.

Threads, and why: http.client is blocking, so the runtime is threads, not asyncio. `concurrency`
slot threads each run one job at a time and settle it on their own keep-alive connection; the
thread calling run() long-polls for as many jobs as there are free slots; one renewal thread
keeps every lease (leases.py). An `async def` handler runs on one event loop thread shared by all
slots (started on first use): its slot submits the coroutine and waits for it, so up to
`concurrency` coroutines run side by side on that loop, and a lost lease cancels the task.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import queue as queue_module
import signal
import socket
import threading
import time
import traceback
from typing import Any, Awaitable, Callable, Dict, List, Optional, Union

from .client import Client
from .errors import BatonError, LeaseLost, PermanentFailure, RetryLater
from .events import Log
from .job import Job
from .leases import Leases
from .transport import Aborted, Retry, encode, path_part
from .version import __version__

Handler = Callable[[Job], Union[Any, Awaitable[Any]]]
ERROR_MESSAGE_MAX = 4096  # WorkerError.message


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Worker:
    """Runs a handler for the jobs of one queue.

    queue: the queue to work.
    handler: a function taking a Job and returning the result (any JSON value), or an `async def`;
        or set it later with the @worker.handler decorator.
    concurrency: jobs run side by side (default 10).
    lease_ms: each lease's length (default 30 s); renewed about every third of it.
    wait_ms: how long a claim long-polls when nothing is ready (default 20 s, Baton's maximum).
    drain_ms: on stop, how long running handlers may take to finish (default 25 s, below
        Kubernetes' 30 s grace period); the jobs still running then are given back.
    worker_id: shown on the jobs it holds (default hostname-pid).
    client: the Client to use (its URL, key, retries); default Client() from BATON_URL and
        BATON_API_KEY.
    handle_signals: run() stops on SIGTERM and SIGINT (when called from the main thread).
    log: where events go (baton.events); default the client's, i.e. the logging logger "baton".
    """

    def __init__(
        self,
        queue: str,
        handler: Optional[Handler] = None,
        *,
        concurrency: int = 10,
        lease_ms: int = 30_000,
        wait_ms: int = 20_000,
        drain_ms: int = 25_000,
        worker_id: Optional[str] = None,
        client: Optional[Client] = None,
        handle_signals: bool = True,
        log: Optional[Log] = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not 1000 <= lease_ms <= 43_200_000:
            raise ValueError("lease_ms must be between 1000 and 43200000")
        if not 0 <= wait_ms <= 20_000:
            raise ValueError("wait_ms must be between 0 and 20000")
        self.queue = queue
        self._handler = handler
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.wait_ms = wait_ms
        self.drain_ms = drain_ms
        self.worker_id = worker_id or default_worker_id()
        self.client = client or Client(log=log)
        self.log: Log = log or self.client.log
        self.handle_signals = handle_signals
        self._transport = self.client.transport
        self._leases = Leases(self._transport, lease_ms, self.log, self._lease_lost)
        self._inbox: "queue.Queue[Optional[Job]]" = queue_module.Queue()
        self._slots = threading.Condition()
        self._busy = 0  # slots holding a job (waiting in the inbox, running or settling)
        self._settling = 0
        self._claim_connection = self._transport.new_connection()
        # Set by stop(), which may run in a signal handler: plain attributes, no locks taken there.
        self._stop_requested = False
        self._stop_reason: Optional[str] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_lock = threading.Lock()
        self._running = False
        self._announcing = threading.Event()  # set: stop announcing

    def handler(self, fn: Handler) -> Handler:
        """Decorator: @worker.handler def handle(job): ..."""
        self._handler = fn
        return fn

    def stop(self, reason: str = "stop") -> None:
        """Stop claiming now (the long-poll in flight is abandoned) and drain: run() lets running
        handlers finish within drain_ms, gives back the rest and returns. Safe from any thread and
        from a signal handler."""
        if self._stop_requested:
            return
        self._stop_reason = reason
        self._stop_requested = True
        self._claim_connection.abort()

    @property
    def stopping(self) -> bool:
        return self._stop_requested

    # --- run -----------------------------------------------------------------------------------

    def run(self) -> None:
        """Work the queue until stop() (or SIGTERM/SIGINT); returns once drained."""
        if self._handler is None:
            raise ValueError("no handler: pass one to Worker() or decorate it with @worker.handler")
        if self._running:
            raise RuntimeError("this worker is already running")
        self._running = True
        previous = self._install_signals()
        slots = [
            threading.Thread(target=self._slot, name=f"baton-slot-{n}", daemon=True) for n in range(self.concurrency)
        ]
        for thread in slots:
            thread.start()
        self._leases.start()
        threading.Thread(target=self._announce_loop, name="baton-announce", daemon=True).start()
        self.log(
            "info",
            "started",
            {
                "url": self.client.url,
                "queue": self.queue,
                "worker_id": self.worker_id,
                "concurrency": self.concurrency,
                "lease_ms": self.lease_ms,
            },
        )
        try:
            self._claim_loop()
            self._drain()
        finally:
            self._say_goodbye()
            for _ in slots:
                self._inbox.put(None)
            self._leases.close()
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._loop = None
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _announce_loop(self) -> None:
        """Tell Baton who this worker is (PUT /v1/workers/{id}: the dashboard's Workers page lists it
        idle or busy), and again every third of the silence Baton allows. Best effort: a failure, or a
        Baton without the route, changes nothing of the work."""
        body = {
            "queues": [self.queue],
            "host": socket.gethostname()[:255],
            "pid": os.getpid(),
            "concurrency": self.concurrency,
            "version": f"baton-client-py/{__version__}",
        }
        while not self._announcing.is_set() and not self._stop_requested:
            wait = 20.0
            try:
                answer = self._transport.request("PUT", f"/v1/workers/{path_part(self.worker_id)}", body, timeout=10)
                wait = max(1.0, (answer or {}).get("silence_ms", 60_000) / 3000)
            except BatonError as error:
                if error.status != 404 and not self._stop_requested:
                    self.log("warning", "announce_failed", {"error": str(error)})
            self._announcing.wait(wait)

    def _say_goodbye(self) -> None:
        """The worker is stopping: it is no longer listed. Best effort, and brief."""
        self._announcing.set()
        try:
            self._transport.request("DELETE", f"/v1/workers/{path_part(self.worker_id)}", timeout=2)
        except BatonError:
            pass

    def _install_signals(self) -> Dict[int, Any]:
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, lambda n, _frame: self.stop(signal.Signals(n).name))
        return previous

    def _claim_loop(self) -> None:
        while not self._stop_requested:
            with self._slots:
                while self._busy >= self.concurrency and not self._stop_requested:
                    self._slots.wait(timeout=0.1)  # short: stop() cannot notify (see stop)
                free = self.concurrency - self._busy
            if self._stop_requested:
                return
            jobs = self._claim(min(free, 1000))
            if jobs:
                self._hand_out(jobs, "claim")

    def _claim(self, max_jobs: int) -> List[Dict[str, Any]]:
        body = {"max_jobs": max_jobs, "lease_ms": self.lease_ms, "wait_ms": self.wait_ms, "worker_id": self.worker_id}
        retry = Retry(max_retries=None, keep_going=lambda: not self._stop_requested)
        try:
            answer = self._transport.request(
                "POST",
                f"/v1/queues/{path_part(self.queue)}/claim",
                body,
                retry=retry,
                timeout=self._transport.timeout + self.wait_ms / 1000,
                connection=self._claim_connection,
            )
            return answer["jobs"]
        except Aborted:
            return []
        except BatonError as error:
            if not self._stop_requested:  # a refusal (a bad key, say): say so, and try again slowly
                self.log("error", "claim_failed", {"status": error.status, "code": error.code, "detail": error.detail})
                self._sleep(5.0)
            return []

    def _sleep(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while not self._stop_requested and time.monotonic() < until:
            time.sleep(min(0.05, until - time.monotonic()))

    def _hand_out(self, claimed: List[Dict[str, Any]], by: str) -> None:
        with self._slots:
            self._busy += len(claimed)
            in_flight = self._busy
        for raw in claimed:
            job = self._hold(raw, by, in_flight)
            self._inbox.put(job)

    def _hold(self, raw: Dict[str, Any], by: str, in_flight: int) -> Job:
        job = Job(raw, self.lease_ms, self._leases.bring_forward)  # type: ignore[arg-type]
        self._leases.add(job)
        self.log("debug", "claimed", {"id": job.id, "attempt": job.attempt, "in_flight": in_flight, "by": by})
        return job

    def _lease_lost(self, job: Job, code: str) -> None:
        if job.lose():
            self.log("warning", "lease_lost", {"id": job.id, "attempt": job.attempt, "during": "renew", "code": code})

    # --- slots ---------------------------------------------------------------------------------

    def _slot(self) -> None:
        while True:
            job = self._inbox.get()
            if job is None:
                return
            while job is not None:
                try:
                    job = self._work(job)
                except Exception as error:  # noqa: BLE001 - a bug here must show, and the slot go on
                    self.log("error", "worker_error", {"id": job.id, "error": repr(error)})
                    job = None
            with self._slots:
                self._busy -= 1
                self._slots.notify_all()

    def _work(self, job: Job) -> Optional[Job]:
        """Run a job and settle it; answers the job its ack or nack claimed in its place, if any."""
        if job.lease_lost.is_set():  # given back while it waited in the inbox
            return None
        try:
            result = self._call(job)
            encode(result)  # a result that cannot be sent fails the attempt, here
            outcome: Optional[BaseException] = None
        except BaseException as error:  # noqa: BLE001 - any failure of the handler fails the attempt
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise
            result, outcome = None, error
        self._leases.release(job)
        if not job.start_settling():
            if not job.given_back:
                self.log("warning", "dropped", {"id": job.id, "attempt": job.attempt})
            return None
        with self._slots:
            self._settling += 1
        try:
            if outcome is None:
                following = self._ack(job, result)
            else:
                following = self._nack(job, outcome)
        finally:
            with self._slots:
                self._settling -= 1
        if not following:
            return None
        with self._slots:
            in_flight = self._busy
        return self._hold(following[0], "ack" if outcome is None else "nack", in_flight)

    def _call(self, job: Job) -> Any:
        result = self._handler(job)  # type: ignore[misc]
        if not inspect.isawaitable(result):
            return result
        future = asyncio.run_coroutine_threadsafe(_awaited(result), self._event_loop())
        job.on_lost(future.cancel)  # cancels the task on the loop
        try:
            return future.result()
        except asyncio.CancelledError:  # concurrent.futures' CancelledError is asyncio's (3.8+)
            if job.lease_lost.is_set():
                raise LeaseLost(f"the lease of job {job.id} is lost") from None
            raise

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=_run_loop, args=(loop,), name="baton-asyncio", daemon=True).start()
                self._loop = loop
            return self._loop

    def _next(self) -> Optional[Dict[str, Any]]:
        """An ack's or nack's `next`: one job to take this one's place, without waiting (the claim
        loop long-polls for slots that find nothing). None while stopping: claim nothing more."""
        if self._stop_requested:
            return None
        return {"max_jobs": 1, "lease_ms": self.lease_ms, "wait_ms": 0, "worker_id": self.worker_id}

    def _ack(self, job: Job, result: Any) -> List[Dict[str, Any]]:
        body: Dict[str, Any] = {"lease_token": job.lease_token, "result": result}
        if job.reported():
            body["progress"] = job.latest_progress()
        following = self._next()
        if following:
            body["next"] = following
        answer = self._settle(job, "ack", body)
        if answer is None:
            return []
        self.log("debug", "acked", {"id": job.id, "attempt": job.attempt})
        return answer.get("next") or []

    def _nack(self, job: Job, error: BaseException) -> List[Dict[str, Any]]:
        details: Dict[str, Any] = {
            "type": type(error).__name__,
            "stack": "".join(traceback.format_exception(type(error), error, error.__traceback__, limit=20)),
        }
        extra = getattr(error, "details", None)
        if isinstance(extra, dict):
            details.update(extra)
        elif extra is not None:
            details["details"] = extra
        message = (str(error) or type(error).__name__)[:ERROR_MESSAGE_MAX]
        body: Dict[str, Any] = {"lease_token": job.lease_token, "error": {"message": message, "details": details}}
        if isinstance(error, PermanentFailure) or getattr(error, "dead", False) is True:
            body["dead"] = True
        elif isinstance(error, RetryLater):
            body["retry_in_ms"] = int(error.delay * 1000)
        if job.reported():
            body["progress"] = job.latest_progress()
        following = self._next()
        if following:
            body["next"] = following
        try:
            encode(body)
        except ValueError:  # details the handler gave that are not JSON
            body["error"]["details"] = {"type": details["type"], "stack": details["stack"]}
        answer = self._settle(job, "nack", body)
        if answer is None:
            return []
        self.log(
            "info", "nacked", {"id": job.id, "attempt": job.attempt, "state": answer.get("state"), "error": message}
        )
        return answer.get("next") or []

    def _settle(self, job: Job, verb: str, body: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """Send the attempt's one ack or nack, retried through outages while the lease may still be
        ours (repeating an ack of the same lease is answered 200 again). Answers the job as the
        server answers it, or None when the lease is lost or the request failed."""
        retry = Retry(max_retries=None, keep_going=lambda: time.monotonic() < job._expires)
        try:
            return self._transport.request("POST", f"/v1/jobs/{path_part(job.id)}/{verb}", body, retry=retry)
        except BatonError as error:
            if error.code in ("lease_lost", "not_found"):
                # Our first request may have landed and its answer been lost: then the job shows it.
                if self._landed(job, verb):
                    return {}
                job.lease_lost.set()
                self.log(
                    "warning", "lease_lost", {"id": job.id, "attempt": job.attempt, "during": verb, "code": error.code}
                )
            else:
                self.log(
                    "error",
                    f"{verb}_failed",
                    {"id": job.id, "attempt": job.attempt, "status": error.status, "code": error.code, "detail": error.detail},
                )
            return None

    def _landed(self, job: Job, verb: str) -> bool:
        try:
            now = self._transport.request("GET", f"/v1/jobs/{path_part(job.id)}", retry=Retry(max_retries=3))
        except BatonError:
            return False
        if now.get("worker_id") != self.worker_id:
            return False
        if verb == "ack":
            return now["state"] == "completed" and now["attempts"] == job.attempt
        return any(e.get("attempt") == job.attempt and not e.get("reason") for e in now.get("errors", []))

    # --- drain ---------------------------------------------------------------------------------

    def _drain(self) -> None:
        with self._slots:
            in_flight = self._busy
        self.log("info", "stopping", {"reason": self._stop_reason, "in_flight": in_flight, "drain_ms": self.drain_ms})
        deadline = time.monotonic() + self.drain_ms / 1000
        with self._slots:
            while self._busy > 0 and time.monotonic() < deadline:
                self._slots.wait(timeout=min(0.1, max(deadline - time.monotonic(), 0)))
        given_back = [job for job in self._leases.held() if job.lose(given_back=True)]
        for job in given_back:
            self._give_back(job)
        # Acks and nacks already on their way are let finish (a few seconds at most).
        until = time.monotonic() + 5
        with self._slots:
            while self._settling > 0 and time.monotonic() < until:
                self._slots.wait(timeout=0.1)
        self.log("info", "drained", {"gave_back": len(given_back)})

    def _give_back(self, job: Job) -> None:
        """nack give_back: the job is ready again at once, its attempt not counted."""
        self._leases.release(job)
        until = min(job._expires, time.monotonic() + 5)
        retry = Retry(max_retries=None, keep_going=lambda: time.monotonic() < until)
        try:
            self._transport.request(
                "POST",
                f"/v1/jobs/{path_part(job.id)}/nack",
                {"lease_token": job.lease_token, "give_back": True},
                retry=retry,
            )
            self.log("warning", "gave_back", {"id": job.id, "attempt": job.attempt})
        except BatonError as error:
            self.log("error", "give_back_failed", {"id": job.id, "code": error.code, "detail": error.detail})



def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    loop.run_forever()  # until run() ends and stops it
    loop.close()


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
