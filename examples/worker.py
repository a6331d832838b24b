#!/usr/bin/env python3
"""A Baton worker in Python, on the library in clients/python (standard library only).

    BATON_URL=http://127.0.0.1:8080 QUEUE=emails python3 examples/worker.py
    BATON_URL=... QUEUE=emails HANDLER=examples/send_mail.py:send_mail python3 examples/worker.py
    BATON_URL=... QUEUE=emails HANDLER_COMMAND=examples/send-mail.sh python3 examples/worker.py

The library does the work (clients/python/README.md): it long-polls for up to CONCURRENCY jobs,
runs them side by side in threads, renews every lease in one batch request, acks with the handler's
result (each ack claiming the job that takes its place), nacks with its error, drops a job whose
lease is lost, retries through outages, and on SIGTERM or SIGINT stops claiming, lets the jobs in
hand finish for up to DRAIN_MS, gives back the rest and exits 0.

The handler is a Python function taking a Job and returning a JSON-able result:
HANDLER=module:function or HANDLER=path/to/file.py:function. Raise an exception to nack (the
queue's backoff decides the retry), PermanentFailure to send the job to dead at once, RetryLater
to choose the delay. job.progress(value) reports how far it got. Or HANDLER_COMMAND runs a shell
command per job: the payload on stdin, exit 0 acks (stdout, if JSON, is the result), any other
status nacks with stderr as the message. With neither, a demo handler understands
{"sleep_ms": 500}, {"steps": 3, "sleep_ms": 3000} (reports {"done": n, "of": 3} after each step),
{"fail": "why"}, {"fail_until_attempt": 2} and {"dead": "why"}.

Settings: BATON_URL, BATON_API_KEY (sent as a bearer token when set), QUEUE, CONCURRENCY (10),
LEASE_MS (30000), WAIT_MS (20000), DRAIN_MS (25000), WORKER_ID. Each event is a JSON line on stdout.
"""

import os
import sys

# The library, from this repository. A worker with the package installed
# (pip install clients/python) needs no such line.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python", "src"))

from baton import Client, PermanentFailure, Worker, command_handler, json_lines, load_handler  # noqa: E402

WORKER_ID = os.environ.get("WORKER_ID") or f"py-worker-{os.getpid()}"


def demo_handler(job):
    payload = job.payload if isinstance(job.payload, dict) else {}
    steps = payload.get("steps", 0)
    for step in range(1, steps + 1):
        job.lease_lost.wait(payload.get("sleep_ms", 0) / 1000 / steps)  # returns early if the lease is lost
        job.progress({"done": step, "of": steps})
    if not steps and payload.get("sleep_ms"):
        job.lease_lost.wait(payload["sleep_ms"] / 1000)
    if payload.get("dead"):
        raise PermanentFailure(payload["dead"])
    if payload.get("fail"):
        raise RuntimeError(payload["fail"])
    if job.attempt < payload.get("fail_until_attempt", 0):
        raise RuntimeError(f"failing until attempt {payload['fail_until_attempt']}")
    return {"handled_by": WORKER_ID, "attempt": job.attempt}


def main():
    # Handler modules written for this example import from it as `worker` (PermanentFailure, demo_handler).
    sys.modules.setdefault("worker", sys.modules[__name__])
    if os.environ.get("HANDLER_COMMAND"):
        handler = command_handler(os.environ["HANDLER_COMMAND"])
    elif os.environ.get("HANDLER"):
        handler = load_handler(os.environ["HANDLER"])
    else:
        handler = demo_handler
    log = json_lines(sys.stdout)
    Worker(
        os.environ.get("QUEUE", "default"),
        handler,
        concurrency=int(os.environ.get("CONCURRENCY", "10")),
        lease_ms=int(os.environ.get("LEASE_MS", "30000")),
        wait_ms=int(os.environ.get("WAIT_MS", "20000")),
        drain_ms=int(os.environ.get("DRAIN_MS", "25000")),
        worker_id=WORKER_ID,
        client=Client(log=log),
        log=log,
    ).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
