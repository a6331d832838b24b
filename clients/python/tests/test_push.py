"""verify_signature against real pushes: a receiver that checks each one with the library, fed by a
Baton delivering a push queue (docs/push.md)."""

from __future__ import annotations

import json
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List

from baton import verify_signature

from .support import ADMIN, PRODUCER, queue_name


class PushSignature(unittest.TestCase):
    def test_pushes_verify_and_changes_do_not(self) -> None:
        seen: List[Dict[str, Any]] = []
        secret = {"value": ""}

        class Receiver(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                header = self.headers.get("Baton-Signature")
                seen.append({"header": header, "body": body})
                ok = verify_signature(header, body, secret["value"])
                answer = json.dumps({"verified": ok}).encode()
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            queue = queue_name("py-push")
            url = f"http://127.0.0.1:{server.server_address[1]}/jobs"
            secret["value"] = ADMIN.request("PUT", f"/v1/queues/{queue}/push", {"url": url})["secret"]
            job = PRODUCER.enqueue(queue, {"to": "ada@example.com"})
            done = PRODUCER.wait(job["id"], timeout=10)
            self.assertEqual(done["state"], "completed")
            self.assertEqual(done["result"], {"verified": True})
        finally:
            server.shutdown()
            server.server_close()
        header, body = seen[0]["header"], seen[0]["body"]
        self.assertTrue(verify_signature(header, body, ["bps_old", secret["value"]]))
        self.assertTrue(verify_signature(header, body.decode(), secret["value"]))
        self.assertFalse(verify_signature(header, body + b" ", secret["value"]))
        self.assertFalse(verify_signature(header, body, "bps_another"))
        self.assertFalse(verify_signature(header, body, secret["value"], now=time.time() + 600))
        self.assertFalse(verify_signature(None, body, secret["value"]))


if __name__ == "__main__":
    unittest.main()
