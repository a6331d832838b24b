"""A handler for the Python worker's tests: examples/worker.py's demo handler, plus one line per
run in the file $LEDGER, so a test can count how often each job was really worked."""

import json
import os
import threading

from worker import demo_handler  # the worker makes itself importable as `worker` for handlers

_lock = threading.Lock()


def handle(job):
    with _lock, open(os.environ["LEDGER"], "a") as ledger:
        ledger.write(json.dumps({"id": job.id, "attempt": job.attempt, "worker": os.environ["WORKER_ID"]}) + "\n")
    return demo_handler(job)
