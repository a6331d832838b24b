"""A worker process for the library's process tests: events as JSON lines on stdout, and a ledger
(LEDGER, one JSON line per handler start and end, written straight to the file so that a SIGKILL
loses none) for the test to count what really ran.

Payload: {"sleep_ms": n} works that long (waking early if the lease is lost); {"block": true} runs
until the lease is lost or the worker gives the job back.
Settings: QUEUE, CONCURRENCY, LEASE_MS, WAIT_MS, DRAIN_MS, WORKER_ID, LEDGER; BATON_URL and
BATON_API_KEY as for any client."""

import json
import os
import sys

from baton import Client, Worker, json_lines

WORKER_ID = os.environ["WORKER_ID"]
ledger = os.open(os.environ["LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def note(**fields):
    os.write(ledger, (json.dumps({"worker": WORKER_ID, "pid": os.getpid(), **fields}) + "\n").encode())


def handle(job):
    note(event="start", id=job.id, attempt=job.attempt, lease_expires_at=job.raw["lease_expires_at"])
    payload = job.payload if isinstance(job.payload, dict) else {}
    if payload.get("block"):
        job.lease_lost.wait(120)
    elif payload.get("sleep_ms"):
        job.lease_lost.wait(payload["sleep_ms"] / 1000)
    note(event="lost" if job.lease_lost.is_set() else "end", id=job.id, attempt=job.attempt)
    return {"worker": WORKER_ID, "pid": os.getpid(), "attempt": job.attempt}


log = json_lines(sys.stdout)
Worker(
    os.environ["QUEUE"],
    handle,
    concurrency=int(os.environ.get("CONCURRENCY", "4")),
    lease_ms=int(os.environ.get("LEASE_MS", "30000")),
    wait_ms=int(os.environ.get("WAIT_MS", "1000")),
    drain_ms=int(os.environ.get("DRAIN_MS", "25000")),
    worker_id=WORKER_ID,
    client=Client(log=log),
    log=log,
).run()
