"""For the outage test: while the database is down (Baton answers 503), an enqueue without an
idempotency key fails at once (it may not be repeated: a lost answer would make a second job),
and one with a key is retried until Baton is back. Prints one JSON line per outcome, and the
client's events (request_retry) as JSON lines too, on stdout."""

import json
import os
import sys

from baton import BatonError, Client, json_lines

queue = os.environ["QUEUE"]
client = Client(max_retries=100, log=json_lines(sys.stdout))
try:
    client.enqueue(queue, {"key": None})
    print(json.dumps({"event": "without_key", "status": 200}), flush=True)
except BatonError as error:
    print(json.dumps({"event": "without_key", "status": error.status, "code": error.code}), flush=True)
job = client.enqueue(queue, {"key": "once"}, idempotency_key="through-the-outage")
print(json.dumps({"event": "with_key", "id": job["id"], "state": job["state"]}), flush=True)
