"""Baton's Python client and worker runtime (standard library only).

    from baton import Client, Worker
    Client().enqueue("emails", {"to": "ada@example.com"})

    worker = Worker("emails")

    @worker.handler
    def send(job):
        return {"sent_to": job.payload["to"]}

    worker.run()
"""

from .client import Client
from .errors import BatonError, LeaseLost, PermanentFailure, RetryLater
from .events import json_lines
from .job import Job
from .push import verify_signature
from .runner import command_handler, load_handler
from .version import __version__
from .worker import Worker

__all__ = [
    "BatonError",
    "Client",
    "Job",
    "LeaseLost",
    "PermanentFailure",
    "RetryLater",
    "Worker",
    "__version__",
    "command_handler",
    "json_lines",
    "load_handler",
    "verify_signature",
]
