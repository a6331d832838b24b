"""The library's exceptions: one for every answer Baton refuses (BatonError), and the ones a handler
raises to steer its job (RetryLater, PermanentFailure) or meets when its lease is gone (LeaseLost)."""

from __future__ import annotations

from typing import Any, List, Optional

from .schema import FieldError, Problem


class BatonError(Exception):
    """A request Baton refused (problem+json), or one that could not reach it after the retries.

    `status` is the HTTP status (None when no answer came: then `code` is "unreachable"), `code`
    the stable problem code to branch on (lease_lost, not_found, validation_failed, ...), `detail`
    what went wrong, `errors` the invalid fields of a validation_failed, `problem` the whole body.
    """

    def __init__(
        self,
        status: Optional[int],
        code: str,
        detail: str,
        errors: Optional[List[FieldError]] = None,
        problem: Optional[Problem] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(f"{status or 'no answer'} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.errors: List[FieldError] = errors or []
        self.problem = problem
        #: Seconds the server asked to wait (Retry-After), when it did.
        self.retry_after = retry_after


class LeaseLost(Exception):
    """This worker no longer holds the job's lease (it expired, the job was cancelled, or the worker
    gave it back while stopping): someone else may run the job now, and nothing this attempt returns
    will be recorded. Raised by job.raise_if_lost(); a handler may let it propagate."""


class RetryLater(Exception):
    """Fail this attempt and retry after `delay` seconds instead of the queue's backoff.

    raise RetryLater("rate limited by the mail provider", delay=60)
    """

    def __init__(self, message: str = "retry later", *, delay: float, details: Any = None) -> None:
        super().__init__(message)
        if delay < 0:
            raise ValueError("delay must be >= 0 seconds")
        self.delay = delay
        self.details = details


class PermanentFailure(Exception):
    """Fail the job for good: it goes to dead now, whatever attempts it has left.

    raise PermanentFailure('payload has no "to" address')
    """

    def __init__(self, message: str = "permanent failure", *, details: Any = None) -> None:
        super().__init__(message)
        self.details = details
