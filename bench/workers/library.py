"""A worker on the Python library as a user runs it (clients/python/src, standard library only), in
a process of its own (bench/workers/ready-go.ts): a handler that returns None, everything else as
shipped (thread slots, renewals, logging). Prints `ready`, starts on a line from stdin, and stops
on SIGTERM by the library's own handler (a drain with nothing in hand)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))

from baton import Client, Worker  # noqa: E402

worker = Worker(
    os.environ.get("QUEUE", "default"),
    lambda job: None,
    concurrency=int(os.environ.get("CONCURRENCY", "16")),
    lease_ms=int(os.environ.get("LEASE_MS", "60000")),
    client=Client(os.environ.get("BATON_URL", "http://127.0.0.1:8080")),
)

print("ready", flush=True)
sys.stdin.readline()
worker.run()
