"""The client: enqueue jobs, read them, await their end, cancel them."""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .errors import BatonError
from .events import Log, to_logging
from .schema import (
    BatchEnqueuedJob,
    EnqueuedJob,
    EnqueueRequest,
    Job,
    JobState,
    ParentFailurePolicy,
    RelatedJob,
)
from .transport import Retry, Transport, path_part

DEFAULT_URL = "http://127.0.0.1:8080"
FINISHED_STATES = ("completed", "dead", "cancelled")
# The server holds an await open for at most this long; longer waits are several requests.
MAX_WAIT_MS = 60_000

TraceContext = Callable[[], Optional[Mapping[str, str]]]
Time = Union[str, datetime]


def is_finished(state: JobState) -> bool:
    return state in FINISHED_STATES


class Client:
    """A Baton client, safe to share between threads (each thread keeps its own connection).

    url: Baton's base URL; default $BATON_URL, else http://127.0.0.1:8080.
    api_key: sent as a bearer token; default $BATON_API_KEY (none when unset).
    timeout: seconds to wait for an answer (a long-poll's wait comes on top).
    max_retries: how many times a transient failure (429, 502-504, a connection refused, reset or
        timed out) is retried, with jittered exponential backoff or after Retry-After. An enqueue
        is retried only when it certainly did not reach the server (connection refused, 429) unless
        it carries an idempotency_key, so that a lost answer never makes a second job.
    trace_context: a function returning the current {"traceparent", "tracestate"} (or None), used
        for jobs enqueued without their own; e.g. OpenTelemetry's propagation.inject into a dict.
    log: where events (request_retry) go; default the logging logger "baton" (see baton.events).
    """

    def __init__(
        self,
        url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 5,
        trace_context: Optional[TraceContext] = None,
        log: Optional[Log] = None,
    ) -> None:
        self.url = (url or os.environ.get("BATON_URL") or DEFAULT_URL).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("BATON_API_KEY")
        self.log: Log = log or to_logging
        self.transport = Transport(self.url, key or None, timeout, self.log)
        self.max_retries = max_retries
        self.trace_context = trace_context

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections (a later request opens a new one)."""
        self.transport.close()

    def request(self, method: str, path: str, body: Any = None, *, retry: bool = True) -> Any:
        """Any endpoint of the API (path from /v1/...), with this client's auth and retries; answers
        the decoded JSON, raises BatonError. retry=False for a request unsafe to repeat."""
        policy = Retry(self.max_retries) if retry else Retry(self.max_retries, unsent_only=True)
        return self.transport.request(method, path, body, retry=policy)

    # --- Enqueue -----------------------------------------------------------------------------

    def enqueue(
        self,
        queue: str,
        payload: Any,
        *,
        group: Optional[str] = None,
        priority: Optional[int] = None,
        delay_ms: Optional[int] = None,
        run_at: Optional[Time] = None,
        max_attempts: Optional[int] = None,
        timeout_ms: Optional[int] = None,
        expires_at: Optional[Time] = None,
        expires_in_ms: Optional[int] = None,
        idempotency_key: Optional[str] = None,
        unique_key: Optional[str] = None,
        on_conflict: Optional[str] = None,
        depends_on: Optional[Sequence[str]] = None,
        on_parent_failure: Optional[ParentFailurePolicy] = None,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> EnqueuedJob:
        """Enqueue one job; answers it as enqueued (its id, state, run_at, ...). Every option is the
        API's field of the same name (EnqueueRequest, docs/job-options.md); run_at and expires_at
        take an RFC 3339 string or an aware datetime."""
        options = dict(
            group=group,
            priority=priority,
            delay_ms=delay_ms,
            run_at=run_at,
            max_attempts=max_attempts,
            timeout_ms=timeout_ms,
            expires_at=expires_at,
            expires_in_ms=expires_in_ms,
            idempotency_key=idempotency_key,
            unique_key=unique_key,
            on_conflict=on_conflict,
            depends_on=list(depends_on) if depends_on is not None else None,
            on_parent_failure=on_parent_failure,
            traceparent=traceparent,
            tracestate=tracestate,
        )
        body = self._job_request({"payload": payload, **options}, self._current_trace())
        retry = Retry(self.max_retries, unsent_only=not idempotency_key)
        return self.transport.request("POST", f"/v1/queues/{path_part(queue)}/jobs", body, retry=retry)

    def enqueue_batch(self, queue: str, jobs: Iterable[EnqueueRequest]) -> List[BatchEnqueuedJob]:
        """Enqueue up to 1,000 jobs in one request, all or none; answers them in order, each with
        `created` (false when an idempotency or unique key matched an existing job). A job's
        depends_on may name an earlier job of the same batch as {"item": n} (its index), or ids."""
        trace = self._current_trace()
        requests = [self._job_request(dict(job), trace) for job in jobs]
        retry = Retry(self.max_retries, unsent_only=not all(j.get("idempotency_key") for j in requests))
        answer = self.transport.request(
            "POST", f"/v1/queues/{path_part(queue)}/jobs/batch", {"jobs": requests}, retry=retry
        )
        return answer["jobs"]

    def _current_trace(self) -> Optional[Mapping[str, str]]:
        return self.trace_context() if self.trace_context is not None else None

    @staticmethod
    def _job_request(job: Dict[str, Any], trace: Optional[Mapping[str, str]]) -> Dict[str, Any]:
        if "payload" not in job:
            raise ValueError("a job needs a payload (None is a valid one)")
        body = {key: value for key, value in job.items() if value is not None or key == "payload"}
        for key in ("run_at", "expires_at"):
            if isinstance(body.get(key), datetime):
                if body[key].tzinfo is None:
                    raise ValueError(f"{key} must be an aware datetime (with a timezone)")
                body[key] = body[key].isoformat()
        if "traceparent" not in body and trace and trace.get("traceparent"):
            body["traceparent"] = trace["traceparent"]
            if trace.get("tracestate") and "tracestate" not in body:
                body["tracestate"] = trace["tracestate"]
        return body

    # --- Read, await, cancel ------------------------------------------------------------------

    def get(self, job_id: str) -> Job:
        """The job as it is now: state, attempts, payload, result, progress, errors, ..."""
        return self.request("GET", f"/v1/jobs/{path_part(job_id)}")

    def wait(self, job_id: str, timeout: Optional[float] = None) -> Job:
        """Wait for the job to finish (completed, dead or cancelled) and answer it; TimeoutError if
        it is still live after `timeout` seconds (None: wait as long as it takes). Look at `state`:
        a dead job's last_error says why."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait_ms = self._wait_ms(deadline)
            path = f"/v1/jobs/{path_part(job_id)}?wait_ms={wait_ms}"
            job: Job = self.transport.request(
                "GET", path, retry=Retry(self.max_retries), timeout=self.transport.timeout + wait_ms / 1000
            )
            if is_finished(job["state"]):
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job['state']} after {timeout} s")

    def wait_many(self, job_ids: Sequence[str], timeout: Optional[float] = None) -> List[Job]:
        """Wait for every job to finish; answers them in the order given. TimeoutError if some are
        still live after `timeout` seconds; BatonError not_found if an id names no job (or one in a
        queue this key may not use). 1,000 ids per request; more are awaited in turn."""
        ids = list(dict.fromkeys(str(i) for i in job_ids))
        deadline = None if timeout is None else time.monotonic() + timeout
        finished: Dict[str, Job] = {}
        for start in range(0, len(ids), 1000):
            pending = ids[start : start + 1000]
            while pending:
                wait_ms = self._wait_ms(deadline)
                answer = self.transport.request(
                    "POST",
                    "/v1/jobs/await",
                    {"ids": pending, "wait_ms": wait_ms},
                    retry=Retry(self.max_retries),
                    timeout=self.transport.timeout + wait_ms / 1000,
                )
                if answer["not_found"]:
                    missing = ", ".join(answer["not_found"])
                    raise BatonError(404, "not_found", f"no job {missing} (or not in a queue this key may use)")
                omitted = set(answer["omitted"])
                for job in answer["jobs"]:
                    if is_finished(job["state"]):
                        finished[job["id"]] = self.get(job["id"]) if job["id"] in omitted else job
                pending = [i for i in pending if i not in finished]
                if pending and deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"{len(pending)} of {len(ids)} jobs still live after {timeout} s")
        return [finished[i] for i in ids]

    @staticmethod
    def _wait_ms(deadline: Optional[float]) -> int:
        if deadline is None:
            return MAX_WAIT_MS
        return max(0, min(MAX_WAIT_MS, int((deadline - time.monotonic()) * 1000)))

    def cancel(self, job_id: str) -> Job:
        """Cancel a waiting, scheduled, ready or claimed job (its worker's lease is lost); answers
        the cancelled job. A finished job raises BatonError invalid_state. Needs the admin scope."""
        return self.request("POST", f"/v1/jobs/{path_part(job_id)}/cancel")

    def parents(self, job_id: str) -> List[RelatedJob]:
        """The jobs this one depends on (depends_on), each in its state now, with its result."""
        return self._related(job_id, "parents")

    def children(self, job_id: str) -> List[RelatedJob]:
        """The jobs that depend on this one."""
        return self._related(job_id, "children")

    def _related(self, job_id: str, which: str) -> List[RelatedJob]:
        jobs: List[RelatedJob] = []
        cursor: Optional[str] = None
        while True:
            query = f"?limit=100&cursor={cursor}" if cursor else "?limit=100"
            page = self.request("GET", f"/v1/jobs/{path_part(job_id)}/{which}{query}")
            jobs += page["jobs"]
            cursor = page["next_cursor"]
            if not cursor:
                return jobs
