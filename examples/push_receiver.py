"""A push queue's endpoint in the standard library only (docs/push.md): checks each delivery's
Baton-Signature with the queue's secret (BATON_PUSH_SECRET), answers 401 to anything else, and
acks a genuine job with a result.

    BATON_PUSH_SECRET=bps_... python3 examples/push_receiver.py 8090
"""

import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ["BATON_PUSH_SECRET"]


def verified(header, body):
    parts = [p.split("=", 1) for p in (header or "").split(",") if "=" in p]
    t = next((v for k, v in parts if k == "t"), "")
    if not t.isdigit() or abs(time.time() - int(t)) > 300:
        return False
    expected = hmac.new(SECRET.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()
    return any(k == "v1" and hmac.compare_digest(v, expected) for k, v in parts)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not verified(self.headers.get("Baton-Signature"), body):
            self.answer(401, {"error": "not signed by Baton"})
            return
        job = json.loads(body)
        # The work goes here. Deliveries are at least once: Baton-Job-Id tells a repeat apart.
        self.answer(200, {"received": job, "attempt": int(self.headers["Baton-Attempt"])})

    def do_GET(self):  # noqa: N802
        self.answer(200, {"ready": True})

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver).serve_forever()
