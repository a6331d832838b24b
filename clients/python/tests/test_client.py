"""The client against a real Baton: every enqueue option, batches with dependency graphs, reads,
awaits, cancel, parents and children, errors, trace context."""

from __future__ import annotations

import threading
import time
import unittest
from datetime import datetime, timedelta, timezone

from baton import BatonError, Client

from .support import ADMIN, PRODUCER, PRODUCER_KEY, URL, queue_name

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def claim_and_ack(queue: str, result: object = None) -> list:
    """Work the ready jobs of the queue by hand (claim, ack), waiting for one if none is ready yet
    (a child is released a moment after its parents complete): answers the ids acked."""
    claim = {"max_jobs": 100, "wait_ms": 5000}
    claimed = ADMIN.request("POST", f"/v1/queues/{queue}/claim", claim)["jobs"]
    for job in claimed:
        ADMIN.request("POST", f"/v1/jobs/{job['id']}/ack", {"lease_token": job["lease_token"], "result": result})
    return [job["id"] for job in claimed]


class EnqueueTest(unittest.TestCase):
    def test_every_option_reaches_the_job(self) -> None:
        q = queue_name("opts")
        job = PRODUCER.enqueue(
            q,
            {"to": "ada@example.com"},
            group="customer:42",
            priority=7,
            delay_ms=60_000,
            max_attempts=4,
            timeout_ms=5000,
            expires_in_ms=3_600_000,
            idempotency_key="k-1",
            unique_key="u-1",
            traceparent=TRACEPARENT,
            tracestate="vendor=1",
        )
        self.assertEqual(job["state"], "scheduled")
        read = PRODUCER.get(job["id"])
        self.assertEqual(read["payload"], {"to": "ada@example.com"})
        for field, value in {
            "group": "customer:42",
            "priority": 7,
            "max_attempts": 4,
            "timeout_ms": 5000,
            "idempotency_key": "k-1",
            "unique_key": "u-1",
            "traceparent": TRACEPARENT,
            "tracestate": "vendor=1",
        }.items():
            self.assertEqual(read[field], value, field)
        self.assertIsNotNone(read["expires_at"])

    def test_run_at_takes_an_aware_datetime_and_refuses_a_naive_one(self) -> None:
        q = queue_name("run-at")
        when = datetime.now(timezone.utc) + timedelta(hours=1)
        job = PRODUCER.enqueue(q, None, run_at=when)
        self.assertEqual(job["state"], "scheduled")
        parsed = datetime.fromisoformat(job["run_at"].replace("Z", "+00:00"))
        self.assertLess(abs((parsed - when).total_seconds()), 1)
        with self.assertRaises(ValueError):
            PRODUCER.enqueue(q, None, run_at=datetime.now())

    def test_an_idempotency_key_answers_the_original_job(self) -> None:
        q = queue_name("idem")
        first = PRODUCER.enqueue(q, {"n": 1}, idempotency_key="same")
        second = PRODUCER.enqueue(q, {"n": 2}, idempotency_key="same")
        self.assertEqual(first["id"], second["id"])
        self.assertEqual(PRODUCER.get(first["id"])["payload"], {"n": 1})

    def test_a_batch_enqueues_a_graph_and_parents_gate_children(self) -> None:
        q = queue_name("graph")
        existing = PRODUCER.enqueue(q, {"step": "existing"})
        jobs = PRODUCER.enqueue_batch(
            q,
            [
                {"payload": {"step": "fetch"}},
                {"payload": {"step": "resize"}, "depends_on": [{"item": 0}]},
                {"payload": {"step": "publish"}, "depends_on": [{"item": 0}, {"item": 1}, existing["id"]]},
            ],
        )
        fetch, resize, publish = (job["id"] for job in jobs)
        self.assertEqual([job["created"] for job in jobs], [True, True, True])
        self.assertEqual([job["state"] for job in jobs], ["ready", "waiting", "waiting"])
        self.assertEqual({p["id"] for p in PRODUCER.parents(publish)}, {fetch, resize, existing["id"]})
        self.assertEqual({c["id"] for c in PRODUCER.children(fetch)}, {resize, publish})

        # Work the queue by hand: only what has its parents done is ever ready.
        first = claim_and_ack(q, {"ok": 1})
        if len(first) < 2:
            first += claim_and_ack(q, {"ok": 1})
        self.assertEqual(set(first), {existing["id"], fetch})
        self.assertEqual(claim_and_ack(q, {"ok": 2}), [resize])
        self.assertEqual(claim_and_ack(q, {"ok": 3}), [publish])
        parents = {p["id"]: p for p in PRODUCER.parents(publish)}
        self.assertEqual(parents[resize]["result"], {"ok": 2})
        self.assertEqual(parents[resize]["parent_outcome"], "completed")

    def test_a_batch_of_more_than_100_jobs_with_idempotency_keys_is_one_request(self) -> None:
        q = queue_name("batch")
        jobs = PRODUCER.enqueue_batch(q, [{"payload": n, "idempotency_key": f"b{n}"} for n in range(250)])
        again = PRODUCER.enqueue_batch(q, [{"payload": n, "idempotency_key": f"b{n}"} for n in range(250)])
        self.assertEqual([j["id"] for j in jobs], [j["id"] for j in again])
        self.assertTrue(all(not j["created"] for j in again))


class ReadAndAwaitTest(unittest.TestCase):
    def test_wait_answers_the_finished_job_and_times_out_while_it_is_live(self) -> None:
        q = queue_name("wait")
        job = PRODUCER.enqueue(q, {"n": 1})
        with self.assertRaises(TimeoutError):
            PRODUCER.wait(job["id"], timeout=0.3)
        timer = threading.Timer(0.5, claim_and_ack, (q, {"done": True}))
        timer.start()
        done = PRODUCER.wait(job["id"], timeout=30)
        timer.join()
        self.assertEqual(done["state"], "completed")
        self.assertEqual(done["result"], {"done": True})

    def test_wait_many_answers_every_job_in_the_order_given(self) -> None:
        q = queue_name("wait-many")
        ids = [job["id"] for job in PRODUCER.enqueue_batch(q, [{"payload": n} for n in range(5)])]
        timer = threading.Timer(0.3, claim_and_ack, (q, "ok"))
        timer.start()
        jobs = PRODUCER.wait_many(list(reversed(ids)), timeout=30)
        timer.join()
        self.assertEqual([j["id"] for j in jobs], list(reversed(ids)))
        self.assertTrue(all(j["state"] == "completed" and j["result"] == "ok" for j in jobs))
        with self.assertRaises(BatonError) as caught:
            PRODUCER.wait_many([ids[0], "999999999"], timeout=1)
        self.assertEqual(caught.exception.code, "not_found")

    def test_cancel_ends_a_job(self) -> None:
        q = queue_name("cancel")
        job = PRODUCER.enqueue(q, None)
        self.assertEqual(ADMIN.cancel(job["id"])["state"], "cancelled")
        self.assertEqual(PRODUCER.wait(job["id"], timeout=5)["state"], "cancelled")


class ErrorTest(unittest.TestCase):
    def test_a_refusal_is_a_baton_error_with_status_code_detail_and_fields(self) -> None:
        with self.assertRaises(BatonError) as caught:
            PRODUCER.enqueue_batch(queue_name("bad"), [{"payload": 1}, {"payload": 2, "priority": 2**40}])
        error = caught.exception
        self.assertEqual((error.status, error.code), (400, "validation_failed"))
        self.assertEqual([e["field"] for e in error.errors], ["jobs[1].priority"])
        self.assertIn("jobs[1].priority", error.detail)

    def test_not_found_and_unauthorized(self) -> None:
        with self.assertRaises(BatonError) as caught:
            PRODUCER.get("999999999")
        self.assertEqual((caught.exception.status, caught.exception.code), (404, "not_found"))
        with self.assertRaises(BatonError) as caught, Client(URL, "not-a-key") as stranger:
            stranger.get("1")
        self.assertEqual((caught.exception.status, caught.exception.code), (401, "unauthorized"))
        with self.assertRaises(BatonError) as caught:
            PRODUCER.cancel("1")  # cancel needs the admin scope
        self.assertEqual(caught.exception.status, 403)

    def test_an_unreachable_server_is_a_baton_error_after_the_retries(self) -> None:
        retries = []
        with Client("http://127.0.0.1:9", "k", max_retries=2, log=lambda _l, e, f: retries.append((e, f))) as client:
            with self.assertRaises(BatonError) as caught:
                client.enqueue("q", None)  # refused: never reached the server, so retried
        self.assertEqual((caught.exception.status, caught.exception.code), (None, "unreachable"))
        self.assertEqual([e for e, _ in retries], ["request_retry", "request_retry"])
        self.assertIn("ConnectionRefusedError", retries[0][1]["reason"])


class TraceContextTest(unittest.TestCase):
    def test_the_hook_gives_the_context_of_jobs_enqueued_without_one(self) -> None:
        q = queue_name("trace")
        hooked = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        context = {"traceparent": hooked, "tracestate": "a=1"}
        with Client(URL, PRODUCER_KEY, trace_context=lambda: context) as client:
            self.check_trace(client, q, hooked)

    def check_trace(self, client: Client, q: str, hooked: str) -> None:
        plain = client.enqueue(q, None)
        own = client.enqueue(q, None, traceparent=TRACEPARENT)
        batch = client.enqueue_batch(q, [{"payload": 1}, {"payload": 2, "traceparent": TRACEPARENT}])
        self.assertEqual((client.get(plain["id"])["traceparent"], client.get(plain["id"])["tracestate"]), (hooked, "a=1"))
        self.assertEqual(client.get(own["id"])["traceparent"], TRACEPARENT)
        self.assertEqual([client.get(j["id"])["traceparent"] for j in batch], [hooked, TRACEPARENT])


if __name__ == "__main__":
    unittest.main()
