"""The worker runtime in process, against a real Baton: results, progress, failures, retry delays,
async handlers, lost leases, concurrency, drain and give back. Assertions are on what the server
shows (the job read back) and what the handler saw."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import unittest
from datetime import datetime
from typing import Any, Dict, List

from baton import Job, LeaseLost, PermanentFailure, RetryLater

from .support import ADMIN, PRODUCER, Events, Running, queue_name, until, worker


def server_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class AnnounceTest(unittest.TestCase):
    def test_a_running_worker_is_listed_with_host_pid_and_concurrency_and_not_once_it_stops(self) -> None:
        q = queue_name("announced")
        w = worker(q, Events(), concurrency=3)

        @w.handler
        def handle(job: Job) -> None:
            return None

        def mine() -> List[Dict[str, Any]]:
            answer = ADMIN.transport.request("GET", "/v1/workers")
            return [a for a in answer["announced"] if q in a["queues"]]

        with Running(w):
            listed = until(mine, what="the worker announced")
            self.assertEqual(listed[0]["id"], w.worker_id)
            self.assertEqual(listed[0]["concurrency"], 3)
            self.assertEqual(listed[0]["pid"], os.getpid())
            self.assertTrue(listed[0]["version"].startswith("baton-client-py/"))
        self.assertEqual(mine(), [])


class ResultsTest(unittest.TestCase):
    def test_the_return_value_is_the_result_and_the_last_report_the_progress(self) -> None:
        q = queue_name("result")
        ids = [j["id"] for j in PRODUCER.enqueue_batch(q, [{"payload": {"n": n}} for n in range(20)])]
        events = Events()
        w = worker(q, events, concurrency=4)

        @w.handler
        def handle(job: Job) -> Dict[str, Any]:
            for step in range(1, 4):
                job.progress({"step": step, "n": job.payload["n"]})
            return {"double": job.payload["n"] * 2}

        with Running(w):
            jobs = PRODUCER.wait_many(ids, timeout=30)
        for n, job in enumerate(jobs):
            self.assertEqual(job["state"], "completed")
            self.assertEqual(job["result"], {"double": n * 2})
            self.assertEqual(job["progress"], {"step": 3, "n": n})  # sent with the ack
            self.assertEqual(job["attempts"], 1)
            self.assertEqual(job["worker_id"], w.worker_id)
        self.assertEqual(len(events.named("acked")), 20)

    def test_many_progress_reports_never_cost_a_lease_or_make_a_lost_lease_of_an_ack(self) -> None:
        # Reports bring renewals forward, so renewals are in flight all the time, crossing acks:
        # none may land after its job's ack (the server would say lease_lost).
        q = queue_name("reports")
        ids = [j["id"] for j in PRODUCER.enqueue_batch(q, [{"payload": n} for n in range(150)])]
        events = Events()
        w = worker(q, events, concurrency=10, lease_ms=1000)

        @w.handler
        def handle(job: Job) -> str:
            for step in range(30):
                job.progress({"step": step})
                time.sleep(0.002 * (job.payload % 7))
            return "done"

        with Running(w):
            jobs = PRODUCER.wait_many(ids, timeout=120)
        self.assertTrue(all(j["state"] == "completed" and j["progress"] == {"step": 29} for j in jobs))
        self.assertTrue(all(j["attempts"] == 1 for j in jobs))
        bad = [e for e in ("lease_lost", "dropped", "renew_failed", "ack_failed") if events.named(e)]
        self.assertEqual(bad, [], [events.named(e) for e in bad])

    def test_a_report_too_large_or_not_json_fails_in_the_handler(self) -> None:
        q = queue_name("big-report")
        job = PRODUCER.enqueue(q, None)
        seen: List[str] = []
        w = worker(q, Events())

        @w.handler
        def handle(job: Job) -> str:
            for value in ("x" * 5000, float("nan")):
                try:
                    job.progress(value)
                except ValueError as error:
                    seen.append(str(error))
            return "fine"

        with Running(w):
            done = PRODUCER.wait(job["id"], timeout=15)
        self.assertEqual(done["state"], "completed")
        self.assertEqual(len(seen), 2)
        self.assertIn("4096", seen[0])


class FailureTest(unittest.TestCase):
    def test_an_exception_nacks_with_its_message_type_and_stack(self) -> None:
        q = queue_name("fail")
        ADMIN.request("PUT", f"/v1/queues/{q}", {"max_attempts": 2, "backoff": {"base_ms": 0, "max_ms": 0, "jitter": False}})
        job = PRODUCER.enqueue(q, None)
        w = worker(q, Events())

        @w.handler
        def broken_handler(job: Job) -> None:
            raise KeyError("no such template")

        with Running(w):
            done = PRODUCER.wait(job["id"], timeout=15)
        self.assertEqual((done["state"], done["dead_reason"], done["attempts"]), ("dead", "attempts_exhausted", 2))
        error = done["last_error"]
        self.assertEqual(error["message"], "'no such template'")
        self.assertEqual(error["details"]["type"], "KeyError")
        self.assertIn("broken_handler", error["details"]["stack"])

    def test_permanent_failure_sends_the_job_to_dead_at_once(self) -> None:
        q = queue_name("dead")
        job = PRODUCER.enqueue(q, None, max_attempts=5)
        w = worker(q, Events())
        w.handler(lambda job: (_ for _ in ()).throw(PermanentFailure("bad input", details={"field": "to"})))
        with Running(w):
            done = PRODUCER.wait(job["id"], timeout=15)
        self.assertEqual((done["state"], done["dead_reason"], done["attempts"]), ("dead", "nacked_dead", 1))
        self.assertEqual(done["last_error"]["message"], "bad input")
        self.assertEqual(done["last_error"]["details"]["field"], "to")

    def test_retry_later_chooses_the_delay(self) -> None:
        q = queue_name("later")
        job = PRODUCER.enqueue(q, None)
        claimed_at: List[str] = []
        w = worker(q, Events())

        @w.handler
        def handle(job: Job) -> None:
            claimed_at.append(job.raw["lease_expires_at"])
            raise RetryLater("the provider said 429", delay=600)

        with Running(w):
            read = until(lambda: (j := PRODUCER.get(job["id"]))["state"] == "scheduled" and j)
        # The retry is due ten minutes after the nack, not after the queue's backoff.
        lease_start = server_time(claimed_at[0]).timestamp() - w.lease_ms / 1000
        self.assertGreater(server_time(read["run_at"]).timestamp(), lease_start + 590)
        self.assertEqual(read["last_error"]["message"], "the provider said 429")

    def test_a_result_that_is_not_json_fails_the_attempt(self) -> None:
        q = queue_name("not-json")
        job = PRODUCER.enqueue(q, None, max_attempts=1)
        w = worker(q, Events())
        w.handler(lambda job: {"when": object()})
        with Running(w):
            done = PRODUCER.wait(job["id"], timeout=15)
        self.assertEqual(done["state"], "dead")
        self.assertEqual(done["last_error"]["details"]["type"], "TypeError")


class AsyncTest(unittest.TestCase):
    def test_async_handlers_run_side_by_side_on_one_loop(self) -> None:
        q = queue_name("async")
        ids = [j["id"] for j in PRODUCER.enqueue_batch(q, [{"payload": n} for n in range(12)])]
        running = {"now": 0, "most": 0, "loops": set()}
        w = worker(q, Events(), concurrency=6)

        @w.handler
        async def handle(job: Job) -> int:
            running["loops"].add(id(asyncio.get_running_loop()))
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
            await asyncio.sleep(0.2)
            running["now"] -= 1
            return job.payload * 10

        with Running(w):
            jobs = PRODUCER.wait_many(ids, timeout=30)
        self.assertEqual([j["result"] for j in jobs], [n * 10 for n in range(12)])
        self.assertEqual(len(running["loops"]), 1)
        self.assertGreater(running["most"], 1)
        self.assertLessEqual(running["most"], 6)


class LostLeaseTest(unittest.TestCase):
    def test_a_cancelled_job_cancels_its_async_handler_and_is_never_settled(self) -> None:
        q = queue_name("lost-async")
        job = PRODUCER.enqueue(q, None)
        seen: List[str] = []
        events = Events()
        w = worker(q, events, lease_ms=1500)

        @w.handler
        async def handle(job: Job) -> str:
            seen.append("started")
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
            return "never"

        with Running(w):
            until(lambda: seen == ["started"])
            ADMIN.cancel(job["id"])
            until(lambda: events.named("dropped"), what="the job dropped")
        self.assertEqual(seen, ["started", "cancelled"])
        self.assertEqual([e["id"] for e in events.named("lease_lost")], [job["id"]])
        self.assertEqual((events.named("acked"), events.named("nacked")), ([], []))
        self.assertEqual(PRODUCER.get(job["id"])["state"], "cancelled")

    def test_a_sync_handler_sees_lease_lost_and_raise_if_lost_stops_it(self) -> None:
        q = queue_name("lost-sync")
        job = PRODUCER.enqueue(q, None)
        seen: List[str] = []
        events = Events()
        w = worker(q, events, lease_ms=1500)

        @w.handler
        def handle(job: Job) -> str:
            seen.append("started")
            try:
                while True:
                    job.lease_lost.wait(0.05)
                    job.raise_if_lost()
            except LeaseLost:
                seen.append("lost")
                raise

        with Running(w):
            until(lambda: seen == ["started"])
            ADMIN.cancel(job["id"])
            until(lambda: events.named("dropped"), what="the job dropped")
        self.assertEqual(seen, ["started", "lost"])
        self.assertEqual((events.named("acked"), events.named("nacked")), ([], []))


class ConcurrencyTest(unittest.TestCase):
    def test_never_more_jobs_at_once_than_the_concurrency_and_acks_claim_the_next(self) -> None:
        q = queue_name("slots")
        ids = [j["id"] for j in PRODUCER.enqueue_batch(q, [{"payload": n} for n in range(60)])]
        lock = threading.Lock()
        running = {"now": 0, "most": 0}
        events = Events()
        w = worker(q, events, concurrency=4)

        @w.handler
        def handle(job: Job) -> None:
            with lock:
                running["now"] += 1
                running["most"] = max(running["most"], running["now"])
            time.sleep(0.01)
            with lock:
                running["now"] -= 1

        with Running(w):
            PRODUCER.wait_many(ids, timeout=30)
        self.assertEqual(running["most"], 4)
        claimed = events.named("claimed")
        self.assertEqual(sorted(e["id"] for e in claimed), sorted(ids))
        self.assertLessEqual(max(e["in_flight"] for e in claimed), 4)
        by = [e["by"] for e in claimed]
        self.assertGreater(by.count("ack"), by.count("claim"))


class DrainTest(unittest.TestCase):
    def test_stop_lets_short_jobs_finish_and_gives_back_a_long_one_which_another_worker_takes_at_once(self) -> None:
        q = queue_name("drain")
        long_job = PRODUCER.enqueue(q, {"long": True}, priority=10)
        short = [j["id"] for j in PRODUCER.enqueue_batch(q, [{"payload": {"n": n}} for n in range(3)])]
        seen: Dict[str, List[str]] = {}
        first_events = Events()
        first = worker(q, first_events, concurrency=4, lease_ms=60_000, drain_ms=1000)

        @first.handler
        def handle(job: Job) -> str:
            seen.setdefault(job.id, []).append("started")
            if job.payload.get("long"):
                job.lease_lost.wait(60)
                seen[job.id].append("told to stop" if job.lease_lost.is_set() else "ran out")
                return "long done"
            time.sleep(0.3)
            return "short done"

        runner = Running(first)
        runner.__enter__()
        until(lambda: len(seen) == 4, what="four jobs running")
        first.stop()
        runner.thread.join(timeout=30)
        self.assertFalse(runner.thread.is_alive())
        # The short jobs finished and were acked during the drain; the long one was given back.
        self.assertTrue(all(PRODUCER.get(i)["state"] == "completed" for i in short))
        self.assertEqual([e["id"] for e in first_events.named("gave_back")], [long_job["id"]])
        self.assertEqual(first_events.items[-1][1], "drained")
        self.assertEqual(seen[long_job["id"]], ["started", "told to stop"])
        back = PRODUCER.get(long_job["id"])
        self.assertEqual((back["state"], back["attempts"]), ("ready", 0))  # the attempt is not counted

        second = worker(q, Events())
        attempts: List[int] = []

        @second.handler
        def again(job: Job) -> str:
            attempts.append(job.attempt)
            return "done by the second"

        with Running(second):
            done = PRODUCER.wait(long_job["id"], timeout=15)
        self.assertEqual((done["state"], done["result"], attempts), ("completed", "done by the second", [1]))


if __name__ == "__main__":
    unittest.main()
