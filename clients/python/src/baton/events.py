"""Where the library's events go. An event is (level, name, fields); levels are "debug", "info",
"warning" and "error". By default they go to the standard `logging` logger "baton" (so they show
wherever your logging is configured; unconfigured, Python prints warnings and errors only). Pass
`log=` to Client or Worker to send them elsewhere, e.g. json_lines(sys.stdout).

Worker events: started, claimed, acked, nacked, lease_lost, dropped, renew_failed, claim_failed,
ack_failed, stopping, gave_back, drained; any request: request_retry."""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime, timezone
from typing import IO, Any, Callable, Dict

Log = Callable[[str, str, Dict[str, Any]], None]

logger = logging.getLogger("baton")
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def to_logging(level: str, event: str, fields: Dict[str, Any]) -> None:
    """The default: a record on the "baton" logger, "event {fields as JSON}", with the event and
    its fields also on the record (record.event, record.fields) for structured handlers."""
    number = LEVELS.get(level, logging.INFO)
    if logger.isEnabledFor(number):
        logger.log(number, "%s %s", event, json.dumps(fields, default=str), extra={"event": event, "fields": fields})


def json_lines(stream: IO[str], min_level: str = "debug") -> Log:
    """One JSON object per event and line on `stream`: {"at", "level", "event", ...fields}. Lines
    are written whole, even from many threads."""
    lock = threading.Lock()
    floor = LEVELS[min_level]

    def log(level: str, event: str, fields: Dict[str, Any]) -> None:
        if LEVELS.get(level, logging.INFO) < floor:
            return
        at = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        line = json.dumps({"at": at, "level": level, "event": event, **fields}, default=str) + "\n"
        with lock:
            stream.write(line)
            stream.flush()

    return log
