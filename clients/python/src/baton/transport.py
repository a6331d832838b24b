"""HTTP to Baton: keep-alive connections (one per thread), JSON in and out, problem+json into
BatonError, and the retries of transient failures (429, 502-504, connection refused or reset,
timeouts) with jittered exponential backoff that honours Retry-After.

Why http.client and not urllib: urllib opens a connection per request; a worker making one request
per job would spend as much on TCP set-up as on the job. Each thread keeps its own connection
(http.client connections are not thread-safe), so N handler threads acking side by side use N
connections, as a hand-written loop would.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import threading
import time
import weakref
from typing import Any, Callable, Dict, Optional, Tuple
from urllib.parse import quote, urlsplit

from .errors import BatonError
from .version import __version__

USER_AGENT = f"baton-client-python/{__version__}"
# A connection idle longer than this is replaced rather than reused: a load balancer or the server
# (BATON_KEEP_ALIVE_TIMEOUT_MS, 72 s by default) may have closed it meanwhile.
IDLE_REUSE_SECONDS = 30.0
TRANSIENT_STATUSES = (429, 502, 503, 504)

Log = Callable[[str, str, Dict[str, Any]], None]


def encode(value: Any) -> bytes:
    """JSON as Baton takes it. NaN and Infinity are not JSON: refused here, not by the server."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


def path_part(value: str) -> str:
    """A queue name, group or id as one path segment."""
    return quote(str(value), safe="")


class Unreachable(Exception):
    """No answer: the connection was refused, reset or timed out. `unsent` is True only when the
    request certainly never reached the server (the connection was refused)."""

    def __init__(self, error: BaseException, unsent: bool) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.unsent = unsent


class Aborted(Exception):
    """The request was abandoned by abort() from another thread (a worker stopping its long-poll)."""


class Retry:
    """When to try a failed request again.

    max_retries: how many retries at most (None: as long as `keep_going` holds).
    keep_going: checked before each retry (a lease still ours, a worker not stopping).
    unsent_only: retry only what certainly did not take effect: a refused connection, or a 429
        (an enqueue without an idempotency key, which would otherwise risk a duplicate job).
    wake: an Event whose setting cuts a pause short (a worker stopping).
    """

    def __init__(
        self,
        max_retries: Optional[int] = 5,
        keep_going: Callable[[], bool] = lambda: True,
        unsent_only: bool = False,
        wake: Optional[threading.Event] = None,
    ) -> None:
        self.max_retries = max_retries
        self.keep_going = keep_going
        self.unsent_only = unsent_only
        self.wake = wake

    def worth_retrying(self, error: Exception) -> bool:
        if isinstance(error, Unreachable):
            return error.unsent or not self.unsent_only
        if isinstance(error, BatonError):
            return error.status == 429 or (error.status in TRANSIENT_STATUSES and not self.unsent_only)
        return False


NO_RETRY = Retry(max_retries=0)


class Connection:
    """One keep-alive HTTP connection, used by one thread at a time; abort() may come from any."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.http: Optional[http.client.HTTPConnection] = None
        self.last_used = 0.0
        self.aborted = False

    def _open(self, timeout: float) -> http.client.HTTPConnection:
        t = self.transport
        if self.http is not None and time.monotonic() - self.last_used > IDLE_REUSE_SECONDS:
            self.close()
        if self.http is None:
            cls = http.client.HTTPSConnection if t.scheme == "https" else http.client.HTTPConnection
            self.http = cls(t.host, t.port, timeout=timeout)
        self.http.timeout = timeout
        if self.http.sock is not None:
            self.http.sock.settimeout(timeout)
        return self.http

    def send(self, method: str, path: str, body: Optional[bytes], timeout: float) -> Tuple[int, Any, bytes]:
        """One attempt: (status, headers, body). Raises Unreachable or Aborted."""
        if self.aborted:
            raise Aborted()
        conn = self._open(timeout)
        headers = dict(self.transport.headers)
        if body is not None:
            headers["content-type"] = "application/json"
        try:
            if conn.sock is None:
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.aborted:  # abort() may have come while there was no socket yet to shut down
                raise Aborted()
            conn.request(method, self.transport.base_path + path, body, headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException, Aborted) as error:
            self.close()
            if self.aborted:
                raise Aborted() from None
            raise Unreachable(error, unsent=isinstance(error, ConnectionRefusedError)) from None
        self.last_used = time.monotonic()
        if response.will_close:
            self.close()
        return response.status, response.headers, data

    def abort(self) -> None:
        """Abandon the request in flight, if any, and any later one on this connection: its socket is
        shut down, which wakes a thread blocked reading it (a long-poll). Takes no lock, so that a
        signal handler may call it (the thread it interrupts may be in send())."""
        self.aborted = True
        conn = self.http
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None

    def __del__(self) -> None:
        # A thread's connection is dropped when the thread ends: close its socket then.
        self.close()


class Transport:
    """Requests to one Baton server, shared by the threads of a Client or a Worker."""

    def __init__(self, url: str, api_key: Optional[str], timeout: float, log: Log) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"BATON_URL must be an http:// or https:// URL, not {url!r}")
        self.url = url
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.base_path = parts.path.rstrip("/")
        self.timeout = timeout
        self.log = log
        self.headers = {"accept": "application/json", "user-agent": USER_AGENT}
        if api_key:
            self.headers["authorization"] = f"Bearer {api_key}"
        self._local = threading.local()
        self._connections: "weakref.WeakSet[Connection]" = weakref.WeakSet()

    def connection(self) -> Connection:
        """This thread's connection."""
        conn = getattr(self._local, "connection", None)
        if conn is None:
            conn = self._local.connection = self.new_connection()
        return conn

    def new_connection(self) -> Connection:
        conn = Connection(self)
        self._connections.add(conn)
        return conn

    def close(self) -> None:
        for conn in list(self._connections):
            conn.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        retry: Retry = NO_RETRY,
        timeout: Optional[float] = None,
        connection: Optional[Connection] = None,
    ) -> Any:
        """Send a request and answer its JSON body; a refusal raises BatonError, and so does a
        failure still transient after the retries `retry` allows (code "unreachable" when no
        answer came). Aborted when `connection` was aborted."""
        data = encode(body) if body is not None else None
        conn = connection or self.connection()
        retries = 0
        while True:
            try:
                return self._attempt(conn, method, path, data, timeout or self.timeout)
            except (Unreachable, BatonError) as error:
                if not retry.worth_retrying(error) or (
                    retry.max_retries is not None and retries >= retry.max_retries
                ):
                    raise self._as_baton_error(error) from None
                if not retry.keep_going():
                    raise self._as_baton_error(error) from None
                wait = self._pause(error, retries)
                reason = f"http {error.status}" if isinstance(error, BatonError) else str(error)
                self.log(
                    "warning",
                    "request_retry",
                    {"method": method, "path": path, "reason": reason, "wait_s": round(wait, 3), "retry": retries + 1},
                )
                retries += 1
                if retry.wake is not None:
                    retry.wake.wait(wait)
                else:
                    time.sleep(wait)
                if not retry.keep_going():
                    raise self._as_baton_error(error) from None

    def _attempt(self, conn: Connection, method: str, path: str, data: Optional[bytes], timeout: float) -> Any:
        status, headers, raw = conn.send(method, path, data, timeout)
        if 200 <= status < 300:
            return json.loads(raw) if raw else None
        try:
            problem = json.loads(raw)
        except ValueError:
            problem = None
        if not isinstance(problem, dict):
            problem = {"status": status, "code": "http_error", "detail": raw[:500].decode(errors="replace")}
        raise BatonError(
            status,
            str(problem.get("code") or "http_error"),
            str(problem.get("detail") or problem.get("title") or ""),
            problem.get("errors") or [],
            problem,  # type: ignore[arg-type]
            retry_after_seconds(headers.get("retry-after")),
        )

    @staticmethod
    def _pause(error: Exception, retries: int) -> float:
        if isinstance(error, BatonError) and error.retry_after is not None:
            return error.retry_after
        return min(0.1 * 2**retries, 5.0) * random.uniform(0.5, 1.0)

    @staticmethod
    def _as_baton_error(error: Exception) -> BatonError:
        if isinstance(error, BatonError):
            return error
        return BatonError(None, "unreachable", str(error))


def retry_after_seconds(value: Optional[str]) -> Optional[float]:
    """Retry-After as seconds: a number of seconds, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
