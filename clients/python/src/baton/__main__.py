"""python3 -m baton work --queue emails --command ./send-mail.sh [--concurrency 4]

Runs a worker from the command line: each job's handler is a shell command (--command: the payload
on stdin, stdout's JSON the result, a non-zero exit a failure with stderr as the message) or a
Python function (--handler module:function or path/to/file.py:function). Events are JSON lines on
stdout. BATON_URL and BATON_API_KEY say where Baton is and the key to use. SIGTERM or SIGINT
drains (--drain-ms) and exits 0."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from .client import Client
from .events import json_lines
from .runner import command_handler, load_handler
from .worker import Worker


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m baton", description="Baton worker runtime")
    commands = parser.add_subparsers(dest="command_name", required=True)
    work = commands.add_parser("work", help="work a queue's jobs")
    work.add_argument("--queue", required=True)
    what = work.add_mutually_exclusive_group(required=True)
    what.add_argument("--command", help="shell command run per job (payload on stdin)")
    what.add_argument("--handler", help="module:function or path/to/file.py:function")
    work.add_argument("--concurrency", type=int, default=10)
    work.add_argument("--lease-ms", type=int, default=30_000)
    work.add_argument("--wait-ms", type=int, default=20_000)
    work.add_argument("--drain-ms", type=int, default=25_000)
    work.add_argument("--worker-id")
    work.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(argv)
    handler = command_handler(args.command) if args.command else load_handler(args.handler)
    log = json_lines(sys.stdout, args.log_level)
    worker = Worker(
        args.queue,
        handler,
        concurrency=args.concurrency,
        lease_ms=args.lease_ms,
        wait_ms=args.wait_ms,
        drain_ms=args.drain_ms,
        worker_id=args.worker_id,
        client=Client(log=log),
        log=log,
    )
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
