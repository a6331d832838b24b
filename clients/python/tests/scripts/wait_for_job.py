"""For the 429 test: Client.wait on JOB_ID, its events (request_retry) and the job's final state as
JSON lines on stdout."""

import json
import os
import sys

from baton import Client, json_lines

job = Client(log=json_lines(sys.stdout)).wait(os.environ["JOB_ID"], timeout=30)
print(json.dumps({"event": "waited", "state": job["state"]}), flush=True)
