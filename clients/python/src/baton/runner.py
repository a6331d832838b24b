"""Handlers from outside Python code: a shell command per job (the command runner), or a function
named as module:function or path/to/file.py:function."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from typing import Any, Callable

from .job import Job

STDERR_MESSAGE_MAX = 2000


class CommandFailed(Exception):
    """The command exited with a non-zero status: its stderr is the message."""

    def __init__(self, message: str, exit_status: int) -> None:
        super().__init__(message)
        self.details = {"exit_status": exit_status}


def command_handler(command: str) -> Callable[[Job], Any]:
    """A handler running `command` with the shell for each job: the payload (JSON) on stdin; exit 0
    acks with stdout as the result (parsed as JSON; null when empty or not JSON); any other status
    nacks with stderr (its first 2,000 characters) as the error message and the status in the
    details. The environment carries BATON_JOB_ID, BATON_JOB_QUEUE, BATON_JOB_ATTEMPT and
    TRACEPARENT/TRACESTATE when the job has them. A lost lease kills the command (its process
    group: the shell and what it started)."""

    def handle(job: Job) -> Any:
        env = dict(os.environ, BATON_JOB_ID=job.id, BATON_JOB_QUEUE=job.queue, BATON_JOB_ATTEMPT=str(job.attempt))
        if job.traceparent:
            env["TRACEPARENT"] = job.traceparent
        if job.tracestate:
            env["TRACESTATE"] = job.tracestate
        process = subprocess.Popen(
            command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group, so that a kill reaches its children
        )
        job.on_lost(lambda: _kill_group(process))
        stdout, stderr = process.communicate(json.dumps(job.payload).encode())
        job.raise_if_lost()
        if process.returncode != 0:
            status = process.returncode
            text = stderr.decode(errors="replace")[:STDERR_MESSAGE_MAX]
            raise CommandFailed(text or f"exit status {status}", status)
        try:
            return json.loads(stdout) if stdout.strip() else None
        except ValueError:
            return None

    return handle


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def load_handler(spec: str) -> Callable[[Job], Any]:
    """module:function (imported from the current directory or sys.path), or path/to/file.py:function."""
    module_name, _, function = spec.rpartition(":")
    if not module_name or not function:
        raise ValueError(f"a handler is module:function or file.py:function, not {spec!r}")
    if module_name.endswith(".py"):
        loader = importlib.util.spec_from_file_location("baton_handler", module_name)
        if loader is None or loader.loader is None:
            raise ValueError(f"cannot load {module_name}")
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    handler = getattr(module, function, None)
    if not callable(handler):
        raise ValueError(f"{spec}: {function} is not a function of {module_name}")
    return handler
