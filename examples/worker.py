#!/usr/bin/env python3
"""A Baton worker in Python, with nothing but the standard library.

    BATON_URL=http://127.0.0.1:8080 QUEUE=emails python3 examples/worker.py
    BATON_URL=... QUEUE=emails HANDLER=examples/send_mail.py:send_mail python3 examples/worker.py
    BATON_URL=... QUEUE=emails HANDLER_COMMAND=examples/send-mail.sh python3 examples/worker.py

It long-polls for up to CONCURRENCY jobs, runs them side by side in a thread pool, renews every
lease it holds at a third of the lease (one batch renew for all that are due), acks with the
handler's result and nacks with its error. Each ack (or nack) also claims the job that takes its
place (ack-and-claim: `next` on the ack), so a busy worker makes one request per job; the long-poll
only runs for slots that found nothing. On SIGTERM or SIGINT it stops claiming (a long-poll in
flight is abandoned; the server hands back what it had claimed for it), lets the jobs in hand
finish and settle, then exits 0. A 503 or a connection error is retried with backoff (honouring
Retry-After); a 409 lease_lost drops the job, whose lease is someone else's now.

The handler is a Python function taking a Job and returning a JSON-able result:
HANDLER=module:function or HANDLER=path/to/file.py:function. Raise an exception to nack (the
queue's backoff decides the retry), PermanentFailure to send the job to dead at once. A handler
may call job.report(progress) (any JSON-able value) to say how far it got: the job's next renewal,
brought forward to within a second, carries the latest report (GET /v1/jobs/{id} shows it). Or
HANDLER_COMMAND runs a shell command per job, as examples/worker.sh does: the payload on stdin,
exit 0 acks (stdout, if JSON, is the result), any other status nacks with stderr as the message.
With neither, a demo handler understands {"sleep_ms": 500}, {"steps": 3, "sleep_ms": 3000} (reports
{"done": n, "of": 3} after each step), {"fail": "why"}, {"fail_until_attempt": 2} and {"dead": "why"}.

Settings: BATON_URL, BATON_API_KEY (sent as a bearer token when set), QUEUE, CONCURRENCY (10),
LEASE_MS (30000), WAIT_MS (20000), WORKER_ID. Each event is a JSON line on stdout.
"""

import importlib
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from http.client import HTTPException

BATON_URL = os.environ.get("BATON_URL", "http://127.0.0.1:8080").rstrip("/")
QUEUE = os.environ.get("QUEUE", "default")
CONCURRENCY = int(os.environ.get("CONCURRENCY", "10"))
LEASE_MS = int(os.environ.get("LEASE_MS", "30000"))
WAIT_MS = int(os.environ.get("WAIT_MS", "20000"))
WORKER_ID = os.environ.get("WORKER_ID", f"py-worker-{os.getpid()}")
PROGRESS_MAX_BYTES = 4096  # what Baton keeps of a progress report (renew's `progress`)

_log_lock = threading.Lock()


def log(event, **fields):
    """One JSON line per event, written whole (threads log concurrently; the signal handler never
    logs, since it may run in the middle of a line the main thread is writing)."""
    at = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    line = json.dumps({"at": at, "worker": WORKER_ID, "event": event, **fields}) + "\n"
    with _log_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


class Failure(Exception):
    """A failed attempt, with details for the job's error history."""

    def __init__(self, message, details=None):
        super().__init__(message)
        self.details = details


class PermanentFailure(Failure):
    """Give up on the job: nack it with dead: true, whatever its attempts. (Any exception with a
    true `dead` attribute does the same.)"""

    dead = True


class Job:
    """A claimed job: what the handler reads, and the lease the worker keeps for it."""

    def __init__(self, claimed):
        self.id = claimed["id"]
        self.queue = claimed["queue"]
        self.payload = claimed["payload"]
        self.attempt = claimed["attempt"]
        self.max_attempts = claimed["max_attempts"]
        self.lease_token = claimed["lease_token"]
        self.lost = threading.Event()  # set when the lease is gone: a long handler may stop early
        self.settling = False
        now = time.monotonic()
        self.deadline = now + LEASE_MS / 1000  # by our clock; the lease is surely gone after it
        self.renew_at = now + LEASE_MS / 3000
        self._progress_lock = threading.Lock()
        self._progress = None
        self._reported = 0  # reports made; the renewals sent the first `_sent` of them
        self._sent = 0

    def report(self, progress):
        """Say how far the job got (any JSON-able value). It goes out with the lease's next renewal,
        brought forward to within a second; reports made meanwhile are replaced by the latest."""
        # A report that cannot be sent fails here, in the handler, not in the renewal of every lease.
        size = len(json.dumps(progress, separators=(",", ":")).encode())
        if size > PROGRESS_MAX_BYTES:
            raise ValueError(f"progress is {size} bytes of JSON; Baton keeps at most {PROGRESS_MAX_BYTES}")
        with self._progress_lock:
            self._progress = progress
            self._reported += 1
            self.renew_at = min(self.renew_at, time.monotonic() + 1)

    def progress_to_send(self):
        """(report number, progress) of a report not sent yet, else None."""
        with self._progress_lock:
            return (self._reported, self._progress) if self._reported > self._sent else None

    def progress_sent(self, number):
        with self._progress_lock:
            self._sent = max(self._sent, number)


# --- HTTP --------------------------------------------------------------------------------------


class Unavailable(Exception):
    """502, 503 or 504, or no answer at all: worth trying again."""

    def __init__(self, reason, retry_after=None):
        super().__init__(reason)
        self.retry_after = retry_after


class Refused(Exception):
    """Any other non-2xx answer: a problem+json body with a stable code (lease_lost, not_found...)."""

    def __init__(self, status, problem):
        super().__init__(f"{status} {problem.get('code')}: {problem.get('detail')}")
        self.status = status
        self.code = problem.get("code")


class Abandoned(BaseException):
    """Raised by the signal handler into a long-poll's network wait, to stop waiting (not an
    Exception: nothing between there and the claim loop may catch it)."""


def call(method, path, body=None, timeout=30.0, retry_while=lambda: True, abortable=None):
    """One request, answered JSON. Retries while retry_while() holds: after Retry-After when the
    server sends one, else after a growing, jittered pause (0.1 s doubling to 5 s). `abortable` (the
    worker) has its `polling` flag set while the request waits on the network, and only then."""
    pause = 0.1
    while True:
        try:
            return send(method, path, body, timeout, abortable)
        except Unavailable as err:
            if not retry_while():
                raise
            wait = err.retry_after if err.retry_after is not None else pause * random.uniform(0.5, 1)
            log("retry", method=method, path=path, reason=str(err), wait_s=round(wait, 3))
            until = time.monotonic() + wait
            while time.monotonic() < until and retry_while():  # a stop cuts the pause short
                time.sleep(min(0.1, until - time.monotonic()))
            pause = min(pause * 2, 5.0)


def send(method, path, body, timeout, abortable=None):
    headers = {"accept": "application/json"}
    if os.environ.get("BATON_API_KEY"):
        headers["authorization"] = f"Bearer {os.environ['BATON_API_KEY']}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    request = urllib.request.Request(BATON_URL + path, data=data, method=method, headers=headers)
    try:
        if abortable:
            abortable.polling = True
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        finally:
            if abortable:
                abortable.polling = False
    except urllib.error.HTTPError as err:
        text = err.read()
        if err.code in (502, 503, 504):
            raise Unavailable(f"http {err.code}", seconds(err.headers.get("retry-after")))
        try:
            problem = json.loads(text)
        except ValueError:
            problem = {"detail": text.decode(errors="replace")}
        raise Refused(err.code, problem if isinstance(problem, dict) else {}) from None
    except (urllib.error.URLError, OSError, HTTPException) as err:  # refused, reset, timed out
        raise Unavailable(f"{type(err).__name__}: {getattr(err, 'reason', err)}") from None
    return json.loads(raw or b"null")


def seconds(retry_after):
    """Retry-After in seconds (the HTTP-date form is left to our own backoff)."""
    try:
        return max(0.0, float(retry_after)) if retry_after else None
    except ValueError:
        return None


# --- The worker ----------------------------------------------------------------------------------


class Worker:
    def __init__(self, handler):
        self.handler = handler
        self.held = {}  # id -> Job, from claim until settled or dropped
        self.changed = threading.Condition()
        self.pool = ThreadPoolExecutor(max_workers=CONCURRENCY, thread_name_prefix="job")
        self.stopping = False
        self.stop_signal = None
        self.polling = False
        self.finished = threading.Event()

    def run(self):
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        renewer = threading.Thread(target=self.renew_loop, name="renewer", daemon=True)
        renewer.start()
        log("started", baton=BATON_URL, queue=QUEUE, concurrency=CONCURRENCY, lease_ms=LEASE_MS)
        while not self.stopping:
            free = self.wait_for_room()
            if free and not self.stopping:
                self.dispatch(self.claim(free))
        log("stopping", signal=self.stop_signal, in_flight=len(self.held))
        self.pool.shutdown(wait=True)  # drain: the jobs in hand finish and settle
        self.finished.set()
        renewer.join()
        log("drained")
        return 0

    def on_signal(self, signum, _frame):
        """Runs in the main thread between two of its bytecodes: sets flags, logs nothing, and
        interrupts only a long-poll's network wait."""
        if self.stopping:
            return
        self.stopping = True
        self.stop_signal = signal.Signals(signum).name
        if self.polling:
            raise Abandoned()

    def wait_for_room(self):
        with self.changed:
            while len(self.held) >= CONCURRENCY and not self.stopping:
                self.changed.wait(timeout=0.5)
            return CONCURRENCY - len(self.held)

    def claim(self, max_jobs):
        """Long-poll for up to max_jobs. A signal during the wait abandons it: the connection closes
        and the server hands back whatever it had claimed for us. (A signal in the instant after the
        answer arrived leaves its jobs claimed until their lease runs out; then they return.)"""
        body = {"max_jobs": max_jobs, "lease_ms": LEASE_MS, "wait_ms": WAIT_MS, "worker_id": WORKER_ID}
        path = f"/v1/queues/{urllib.parse.quote(QUEUE, safe='')}/claim"
        try:
            answer = call("POST", path, body, WAIT_MS / 1000 + 30, lambda: not self.stopping, abortable=self)
            return answer["jobs"]
        except (Abandoned, Unavailable):
            return []
        except Refused as err:  # a bad setting or key: say so, and keep trying slowly
            log("claim_refused", status=err.status, code=err.code, detail=str(err))
            self.changed_wait(5)
            return []

    def changed_wait(self, seconds_):
        with self.changed:
            self.changed.wait(timeout=seconds_)

    def dispatch(self, claimed):
        """Hand claimed jobs to the pool."""
        for raw in claimed:
            self.pool.submit(self.work, self.hold(raw))

    def hold(self, raw, replacing=None):
        """Start keeping a claimed job's lease; `replacing` (a job just settled) stops being held in
        the same step, so the count of jobs in hand never passes CONCURRENCY."""
        job = Job(raw)
        with self.changed:
            if replacing is not None:
                self.held.pop(replacing.id, None)
            self.held[job.id] = job
            in_flight = len(self.held)
        log("claimed", id=job.id, attempt=job.attempt, in_flight=in_flight, by="ack" if replacing else "claim")
        return job

    def work(self, job):
        """Run a job, then the one its ack claimed in its place, and so on, in this thread."""
        while job is not None:
            job = self.work_one(job)

    def work_one(self, job):
        """Run one job and settle it; answers the next job, when the ack or nack claimed one."""
        following = []
        try:
            try:
                result = self.handler(job)
                json.dumps(result)  # a result that cannot be sent fails the attempt, here
            except Exception as err:  # noqa: BLE001 - any failure of the handler fails the attempt
                if not job.lost.is_set():
                    following = self.nack(job, err)
            else:
                if not job.lost.is_set():
                    following = self.ack(job, result)
            if job.lost.is_set():
                log("dropped", id=job.id, attempt=job.attempt)
        except Exception as err:  # noqa: BLE001 - a bug here must show, not vanish into the pool's Future
            log("worker_error", id=job.id, error=repr(err))
        finally:
            # One job at most (next asks for one): it takes this job's place in hand. Even while
            # stopping it is ours now, so it is worked and settled before the worker exits.
            replacement = self.hold(following[0], replacing=job) if following else None
            with self.changed:
                self.held.pop(job.id, None)
                self.changed.notify_all()
        return replacement

    def next_claim(self):
        """`next` for an ack or nack: one job to take this one's place, without waiting (the claim
        loop long-polls for slots that find nothing). None while stopping: claim nothing more."""
        if self.stopping:
            return None
        return {"max_jobs": 1, "lease_ms": LEASE_MS, "wait_ms": 0, "worker_id": WORKER_ID}

    def ack(self, job, result):
        """Ack with the result; answers the jobs the ack claimed (ack-and-claim)."""
        body = {"lease_token": job.lease_token, "result": result}
        following = self.next_claim()
        if following:
            body["next"] = following
        answer = self.settle(job, "ack", body)
        if answer is None:
            return []
        log("acked", id=job.id, attempt=job.attempt)
        return answer.get("next") or []

    def nack(self, job, err):
        details = getattr(err, "details", None)
        if details is None:
            details = {"type": type(err).__name__, "traceback": traceback.format_exc(limit=5).splitlines()}
        body = {
            "lease_token": job.lease_token,
            "error": {"message": (str(err) or type(err).__name__)[:4096], "details": details},
            "dead": bool(getattr(err, "dead", False)),
        }
        following = self.next_claim()
        if following:
            body["next"] = following
        answer = self.settle(job, "nack", body)
        if answer is None:
            return []
        message = body["error"]["message"]
        log("nacked", id=job.id, attempt=job.attempt, state=answer["state"], error=message)
        return answer.get("next") or []

    def settle(self, job, verb, body):
        """Send the one ack or nack of this attempt, retrying through outages while the lease may
        still be ours (a retried ack of the same lease is answered 200 again). Returns the job as
        the server answers it, or None when the lease is lost or surely expired."""
        job.settling = True
        try:
            return call(
                "POST", f"/v1/jobs/{job.id}/{verb}", body, retry_while=lambda: time.monotonic() < job.deadline
            )
        except Refused as err:
            if err.code in ("lease_lost", "not_found"):
                job.lost.set()
                log("lease_lost", id=job.id, attempt=job.attempt, during=verb, code=err.code)
            else:
                log(f"{verb}_refused", id=job.id, status=err.status, code=err.code, detail=str(err))
        except Unavailable as err:
            job.lost.set()
            log(f"{verb}_abandoned", id=job.id, attempt=job.attempt, reason=str(err))
        return None

    def renew_loop(self):
        """Renew, in one request, every held lease that is a third of the way through."""
        while not self.finished.is_set():
            now = time.monotonic()
            with self.changed:
                held = list(self.held.values())
            due = [job for job in held if job.renew_at <= now and not job.lost.is_set()]
            if due:
                self.renew(due, now)
            next_at = min((job.renew_at for job in held), default=now + 1)
            self.finished.wait(timeout=min(max(next_at - time.monotonic(), 0.05), 1))

    def renew(self, due, now):
        renewals, reports = [], {}
        for job in due:
            renewal = {"id": job.id, "lease_token": job.lease_token, "lease_ms": LEASE_MS}
            report = job.progress_to_send()
            if report is not None:
                reports[job.id] = report[0]
                renewal["progress"] = report[1]
            renewals.append(renewal)
        try:
            answer = call("POST", "/v1/jobs/renew", {"renewals": renewals}, retry_while=lambda: False)
        except (Unavailable, Refused) as err:
            log("renew_failed", ids=[job.id for job in due], reason=str(err))
            if isinstance(err, Refused) and err.code in ("validation_failed", "payload_too_large") and reports:
                # A report Baton would not keep must not cost the leases: drop the reports, renew again.
                for job in due:
                    if job.id in reports:
                        job.progress_sent(reports[job.id])
                return self.renew(due, now)
            for job in due:  # try again soon, well inside the lease
                job.renew_at = now + min(1.0, LEASE_MS / 10000)
            return
        by_id = {job.id: job for job in due}
        for item in answer["results"]:
            job = by_id[item["id"]]
            if item["outcome"] == "renewed":
                job.deadline = now + item["lease_ms"] / 1000
                job.renew_at = now + item["lease_ms"] / 3000
                if job.id in reports:
                    job.progress_sent(reports[job.id])
                if job.progress_to_send() is not None:  # reported while this renewal was on its way
                    job.renew_at = min(job.renew_at, now + 1)
            elif not job.settling:  # (a renew that crosses the job's own ack finds it gone: no news)
                job.lost.set()
                log("lease_lost", id=job.id, attempt=job.attempt, during="renew", code=item["outcome"])


# --- Handlers ------------------------------------------------------------------------------------


def demo_handler(job):
    payload = job.payload if isinstance(job.payload, dict) else {}
    steps = payload.get("steps", 0)
    if steps:
        for step in range(1, steps + 1):
            job.lost.wait(payload.get("sleep_ms", 0) / 1000 / steps)
            job.report({"done": step, "of": steps})
    elif payload.get("sleep_ms"):
        job.lost.wait(payload["sleep_ms"] / 1000)  # returns early if the lease is lost
    if payload.get("dead"):
        raise PermanentFailure(payload["dead"])
    if payload.get("fail"):
        raise Failure(payload["fail"])
    if job.attempt < payload.get("fail_until_attempt", 0):
        raise Failure(f"failing until attempt {payload['fail_until_attempt']}")
    return {"handled_by": WORKER_ID, "attempt": job.attempt}


def command_handler(command):
    """Run a shell command per job, as examples/worker.sh does."""

    def handle(job):
        payload = json.dumps(job.payload)
        proc = subprocess.run(command, shell=True, input=payload, capture_output=True, text=True)
        if proc.returncode != 0:
            status = proc.returncode
            raise Failure(proc.stderr[:2000] or f"exit status {status}", {"exit_status": status})
        try:
            return json.loads(proc.stdout) if proc.stdout.strip() else None
        except ValueError:
            return None

    return handle


def load_handler(spec):
    """module:function, or path/to/file.py:function."""
    module_name, _, function = spec.rpartition(":")
    if not module_name or not function:
        raise SystemExit(f"HANDLER must be module:function or file.py:function, not {spec!r}")
    if module_name.endswith(".py"):
        loader = importlib.util.spec_from_file_location("baton_handler", module_name)
        if loader is None:
            raise SystemExit(f"cannot load {module_name}")
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    return getattr(module, function)


def main():
    # A handler module that does `from worker import PermanentFailure` gets this module's classes.
    sys.modules.setdefault("worker", sys.modules[__name__])
    if os.environ.get("HANDLER_COMMAND"):
        handler = command_handler(os.environ["HANDLER_COMMAND"])
    elif os.environ.get("HANDLER"):
        handler = load_handler(os.environ["HANDLER"])
    else:
        handler = demo_handler
    return Worker(handler).run()


if __name__ == "__main__":
    sys.exit(main())
