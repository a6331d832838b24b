"""The bench's hand-written worker loop in Python (standard library), as bench/workers/loop.ts is in
TypeScript: CONCURRENCY threads, each with its own keep-alive http.client connection, claims one job
and then acks it with `next` for one more (one request per job). No leases renewed, no handler: the
floor the Python library is measured against. Prints `ready`, starts on a line from stdin, stops on
SIGTERM."""
import http.client
import json
import os
import signal
import sys
import threading
import urllib.parse

url = urllib.parse.urlsplit(os.environ.get("BATON_URL", "http://127.0.0.1:8080"))
queue = urllib.parse.quote(os.environ.get("QUEUE", "default"), safe="")
concurrency = int(os.environ.get("CONCURRENCY", "16"))
claim = {"max_jobs": 1, "lease_ms": 60000, "wait_ms": 1000}
if os.environ.get("LOOP_WORKER_ID"):  # its claims then name the worker, as the libraries' do
    claim["worker_id"] = os.environ["LOOP_WORKER_ID"]
following = dict(claim, wait_ms=0)
stopping = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stopping.set())


def post(conn, path, body):
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    res = conn.getresponse()
    data = res.read()
    if res.status != 200:
        raise RuntimeError(f"{path}: HTTP {res.status} {data[:200]!r}")
    return json.loads(data)


def slot():
    conn = http.client.HTTPConnection(url.hostname, url.port)
    hand = []
    while not stopping.is_set():
        if not hand:
            hand = post(conn, f"/v1/queues/{queue}/claim", claim)["jobs"]
            continue
        job = hand[0]
        hand = post(conn, f"/v1/jobs/{job['id']}/ack",
                    {"lease_token": job["lease_token"], "result": None, "next": following})["next"]
    conn.close()


print("ready", flush=True)
sys.stdin.readline()
threads = [threading.Thread(target=slot, daemon=True) for _ in range(concurrency)]
for t in threads:
    t.start()
stopping.wait()
for t in threads:
    t.join(timeout=5)
