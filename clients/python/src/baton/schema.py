"""Types of the Baton HTTP API, generated from openapi/openapi.json by
clients/python/generate_schema.py. Do not edit: run the generator (a test fails on drift).
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

API_VERSION = "0.1.0"


#: Live: waiting (for parents, depends_on), scheduled, ready, claimed. Finished: completed, dead, cancelled.
JobState = Literal["waiting", "scheduled", "ready", "claimed", "completed", "dead", "cancelled"]


#: Why a dead job died.
DeadReason = Literal["lease_expired", "attempts_exhausted", "nacked_dead", "deadline_exceeded", "expired"]


#: With depends_on: when a parent goes dead, is cancelled or expires, cancel this job (the default; a redrive of the parent brings it back) or run it anyway once the other parents are done (its dependencies then show parents_failed).
ParentFailurePolicy = Literal["cancel", "run"]


#: deadline_exceeded: the attempt's budget (timeout_ms) has run out; it cannot be renewed.
RenewOutcome = Literal["renewed", "lease_lost", "not_found", "deadline_exceeded"]


AckOutcome = Literal["acked", "lease_lost", "not_found"]


#: Stable machine-readable code; branch on this.
ProblemCode = Literal["validation_failed", "malformed_json", "bad_request", "unauthorized", "forbidden", "not_found", "queue_not_found", "method_not_allowed", "request_timeout", "lease_lost", "deadline_exceeded", "invalid_state", "queue_not_empty", "queue_limit_reached", "schedule_limit_reached", "move_running", "move_finished", "payload_too_large", "uri_too_long", "unsupported_media_type", "too_many_waiters", "internal_error", "unavailable"]


class FieldError(TypedDict):
    """One invalid field, e.g. jobs[3].priority, and what is wrong with it."""
    field: str
    message: str


class _ProblemRequired(TypedDict):
    #: URI naming the problem type: urn:baton:problem:<code>
    type: str
    title: str
    status: int
    code: ProblemCode
    #: What went wrong, naming the field or resource.
    detail: str


class Problem(_ProblemRequired, total=False):
    """RFC 9457 problem details"""
    instance: str
    request_id: str
    #: For validation_failed: each invalid field, e.g. jobs[3].priority.
    errors: List[FieldError]


class _EnqueueRequestRequired(TypedDict):
    #: Any JSON value; handed to the worker as is.
    payload: Any


class EnqueueRequest(_EnqueueRequestRequired, total=False):
    #: A group of jobs within a queue (a tenant, a customer, an API key): 1 to 128 printable ASCII characters, no spaces (percent-encode it in a URL path). Groups are served in turn and can have their own limits. Not "." or "..".
    group: str
    #: Higher runs first.
    priority: int
    #: Run no earlier than this long from now.
    delay_ms: int
    #: Run no earlier than this time (RFC 3339). Not with delay_ms.
    run_at: str
    #: Claims allowed before the job is dead-lettered. Default: the queue setting.
    max_attempts: int
    #: W3C trace context of the producer, handed to every worker that claims the job (docs/workers.md, "Trace context"). Instead of this field, a `traceparent` header may carry it (for a batch: every job without its own).
    traceparent: str
    #: W3C tracestate, kept with traceparent (only with it).
    tracestate: str
    #: Re-sending the same key to the same queue within the key retention returns the original job and creates nothing.
    idempotency_key: str
    #: Wall-clock budget of one attempt, from its claim: renewals cannot extend the lease past it, and the attempt fails at it (error reason deadline_exceeded). Default: the queue setting (none).
    timeout_ms: int
    #: A job not claimed by this time is never handed out; it goes to dead (reason expired). Must be after run_at, and after now (+ delay_ms) by the database clock: a job that could never run is a 400.
    expires_at: str
    #: expires_at as a length from now. Not with expires_at. More than delay_ms, and ending after run_at.
    expires_in_ms: int
    #: At most one waiting (scheduled, ready, or waiting for parents) job per queue and key; free again once that job is claimed.
    unique_key: str
    #: Only with unique_key, when a waiting job holds the key: keep (the default) answers it unchanged (200); replace gives it this payload, priority and run_at (debounce).
    on_conflict: Literal["keep", "replace"]
    #: Parents: the job waits (state waiting) until every one has completed. A job id (in a queue the key may use), or, in a batch, {"item": n} for an earlier job of the same request, so a whole graph is enqueued at once and cannot hold a cycle. At most 1000 parents; a parent already completed counts as done; one already dead or cancelled applies on_parent_failure at once.
    depends_on: List[Union[str, Dict[str, Any]]]
    on_parent_failure: ParentFailurePolicy


class _EnqueuedJobRequired(TypedDict):
    id: str
    queue: str
    group: Optional[str]
    state: JobState
    priority: int
    #: When the job becomes claimable.
    run_at: str
    attempts: int
    max_attempts: int
    idempotency_key: Optional[str]
    #: When the job was enqueued.
    created_at: str
    timeout_ms: Optional[int]
    expires_at: Optional[str]
    unique_key: Optional[str]


class EnqueuedJob(_EnqueuedJobRequired, total=False):
    """A job as enqueued. A new job is ready when due now and scheduled when run_at is in the future; waiting while a parent (depends_on) has not completed, or cancelled at once when a parent had failed; the original job returned for a repeated idempotency key may be in any state."""
    #: Present when the request gave depends_on. true: the job was created and waits for those parents. false: an existing job answered the request (its idempotency or unique key), and this request's depends_on was not applied to it: that job keeps the parents it was created with (GET /v1/jobs/{id}/parents).
    depends_on_applied: bool


class _BatchEnqueuedJobRequired(TypedDict):
    id: str
    queue: str
    group: Optional[str]
    state: JobState
    priority: int
    #: When the job becomes claimable.
    run_at: str
    attempts: int
    max_attempts: int
    idempotency_key: Optional[str]
    #: When the job was enqueued.
    created_at: str
    timeout_ms: Optional[int]
    expires_at: Optional[str]
    unique_key: Optional[str]
    #: false when an idempotency key matched an existing job, or a unique key a waiting one.
    created: bool


class BatchEnqueuedJob(_BatchEnqueuedJobRequired, total=False):
    """An EnqueuedJob, and whether this request created it."""
    #: Present when the request gave depends_on. true: the job was created and waits for those parents. false: an existing job answered the request (its idempotency or unique key), and this request's depends_on was not applied to it: that job keeps the parents it was created with (GET /v1/jobs/{id}/parents).
    depends_on_applied: bool


class ClaimRequest(TypedDict, total=False):
    max_jobs: int
    #: Lease length. Default: the queue setting.
    lease_ms: int
    #: Long-poll: wait up to this long for a job when none is ready.
    wait_ms: int
    #: Shown on the job.
    worker_id: str


class ClaimedJob(TypedDict):
    id: str
    queue: str
    group: Optional[str]
    #: The payload given at enqueue.
    payload: Any
    priority: int
    #: 1 on the first claim, 2 on the second, ...
    attempt: int
    max_attempts: int
    #: Present it to renew, ack and nack.
    lease_token: str
    #: Renew before this or the job returns to the queue.
    lease_expires_at: str
    deadline_at: Optional[str]
    #: When the job became due.
    run_at: str
    #: When the job was enqueued.
    created_at: str
    traceparent: Optional[str]
    tracestate: Optional[str]


class _JobErrorRequired(TypedDict):
    attempt: int
    #: When the attempt failed.
    at: str
    message: str


class JobError(_JobErrorRequired, total=False):
    """One failed attempt, as its nack (or the lost lease) recorded it."""
    #: As given by the worker.
    details: Any
    #: Set when Baton failed the attempt: lease_expired, deadline_exceeded or expired; or superseded, when the job came back to waiting (a retry, a re-arm, a redrive) while a newer job held its unique_key, and was cancelled in favour of that job.
    reason: str
    #: With reason superseded: the id of the job that holds the unique_key and runs.
    superseded_by: str
    worker_id: Optional[str]


class JobDependencies(TypedDict):
    """Only on GET /v1/jobs/{id} of a job enqueued with depends_on."""
    #: Parents named in depends_on.
    parents: int
    #: Parents not finished yet: the job waits while any is.
    parents_pending: int
    #: Parents that went dead, were cancelled or expired. Above 0 on a job that ran: it ran anyway (on_parent_failure run).
    parents_failed: int
    on_parent_failure: ParentFailurePolicy


class _JobRequired(TypedDict):
    id: str
    queue: str
    group: Optional[str]
    state: JobState
    priority: int
    #: When the job becomes claimable.
    run_at: str
    attempts: int
    max_attempts: int
    idempotency_key: Optional[str]
    #: When the job was enqueued.
    created_at: str
    timeout_ms: Optional[int]
    expires_at: Optional[str]
    unique_key: Optional[str]
    #: The payload given at enqueue.
    payload: Any
    claimed_at: Optional[str]
    lease_expires_at: Optional[str]
    deadline_at: Optional[str]
    worker_id: Optional[str]
    finished_at: Optional[str]
    #: What the worker gave at ack (null until then).
    result: Any
    last_error: Optional[JobError]
    #: Failed attempts, oldest first (the last 20).
    errors: List[JobError]
    dead_reason: Optional[DeadReason]
    #: What the job's worker last reported with a renewal (renew's `progress`), or null. Kept when the job finishes; a retry keeps it until the next attempt reports; a redrive clears it.
    progress: Any
    traceparent: Optional[str]
    tracestate: Optional[str]
    #: Metadata kept with the job, or null: for a message sent through the SQS endpoint, its message attributes, system attributes and sender (docs/sqs.md). In lists, only with include_payload.
    meta: Any


class Job(_JobRequired, total=False):
    #: In lists that leave payloads out (no include_payload): the start of the payload's JSON text, at most 120 characters, ending in "…" when cut.
    payload_preview: str
    dependencies: JobDependencies


class JobAndNext(Job, total=False):
    #: Only when the request gave `next`: the jobs claimed after the ack, under fresh leases. Empty when none was ready within next.wait_ms, when an item of a batch lost its lease, or when the claim failed; the ack stands either way.
    next: List[ClaimedJob]


class AwaitResponse(TypedDict):
    #: Every job found, in request order: finished, or still live when the wait ran out.
    jobs: List[Job]
    #: Ids of no job (or of a job in a queue this key may not use), in request order.
    not_found: List[str]
    #: How many of `jobs` are completed, dead or cancelled.
    finished: int
    #: How many of `jobs` are still live: 0 when all have finished.
    unfinished: int
    #: Ids of jobs answered without payload, result and errors (payload and result null, errors empty), in request order: the answer had reached BATON_AWAIT_ANSWER_MAX_BYTES of them. GET /v1/jobs/{id} reads each whole. Empty for most answers.
    omitted: List[str]


class RelatedJob(TypedDict):
    """A parent or a child of a job, in its state now (null: pruned)."""
    id: str
    queue: str
    state: Optional[JobState]
    parent_outcome: Optional[Literal["completed", "dead", "cancelled"]]
    #: A completed parent's result (the ack's); null otherwise, and for children.
    result: Any
    finished_at: Optional[str]


class RelatedJobList(TypedDict):
    jobs: List[RelatedJob]
    next_cursor: Optional[str]


class _BatchRenewItemRequired(TypedDict):
    #: Job id: a decimal string without leading zeros.
    id: str
    #: The token minted by the claim that handed you this job.
    lease_token: str


class BatchRenewItem(_BatchRenewItemRequired, total=False):
    #: New lease length from now. Default: the length the claim (or the last renew) used.
    lease_ms: int
    #: The worker's progress, any JSON up to 4096 bytes (else 413 naming the field): kept on the job (latest wins) and shown by GET /v1/jobs/{id}, the job list and the dashboard; null clears it; left out, the job keeps what it has (what the last renewal reported).
    progress: Any


class _BatchRenewResultRequired(TypedDict):
    id: str
    outcome: RenewOutcome


class BatchRenewResult(_BatchRenewResultRequired, total=False):
    #: The new expiry (renewed leases only).
    lease_expires_at: str
    lease_ms: int


class BatchRenewResponse(TypedDict):
    #: One per renewal, in request order.
    results: List[BatchRenewResult]
    renewed: int
    failed: int


class _WorkerErrorRequired(TypedDict):
    message: str


class WorkerError(_WorkerErrorRequired, total=False):
    """What went wrong, as the worker tells it."""
    #: Anything that helps: a stack trace, a status code...
    details: Any


class _AckRequestRequired(TypedDict):
    #: The token minted by the claim that handed you this job.
    lease_token: str


class AckRequest(_AckRequestRequired, total=False):
    #: Stored and shown on the job.
    result: Any
    #: The worker's progress, any JSON up to 4096 bytes (else 413 naming the field): how far the job got, kept on the completed job and shown by GET /v1/jobs/{id}, the job list and the dashboard; null clears it; left out, the job keeps what it has (what the last renewal reported).
    progress: Any
    next: ClaimRequest


class _NackRequestRequired(TypedDict):
    #: The token minted by the claim that handed you this job.
    lease_token: str


class NackRequest(_NackRequestRequired, total=False):
    error: WorkerError
    #: Retry after this long instead of the queue's backoff.
    retry_in_ms: int
    #: Give up now: the job goes to dead whatever its attempts.
    dead: bool
    #: Give the job back unfinished (a worker shutting down): it is ready again at once, in its old place in claim order, and this attempt is not counted (attempts goes back down, so a job on its last attempt is not sent to dead) and records no error. Cannot be combined with `error`, `retry_in_ms` or `dead: true` (400 naming the field).
    give_back: bool
    #: The worker's progress, any JSON up to 4096 bytes (else 413 naming the field): how far this attempt got, kept on the job wherever it goes (retry or dead) and shown by GET /v1/jobs/{id}, the job list and the dashboard; null clears it; left out, the job keeps what it has (what the last renewal reported).
    progress: Any
    next: ClaimRequest
