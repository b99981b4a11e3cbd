"""When a request to the API server is tried again: urllib3's Retry, configured per request.

Retried, with jittered exponential backoff (or the server's `Retry-After`, capped):
- 429, 500, 502, 503, 504 answers and broken or stalled connections, on requests that are safe
  to repeat only: reads (GET) and server-side apply (a PATCH that states the whole intent, so
  applying it twice is applying it once);
- a connection that could not be opened, on any request: nothing was sent. Only a few times,
  since a refused connection is more often a wrong address than a restarting server.
Never a POST, a DELETE or another PATCH once it may have reached the server.

A stall (no byte of the answer for a while, or no answer to the connection's opening) is given up
within seconds, not after the whole read timeout: the first attempt of a request waits
STALL_TIMEOUTS[0] seconds, each attempt after a stall waits longer (a server that is slow, not
stalled, still answers the second or third time), up to the last. A request that may not be
repeated waits the last from the start, since its stall would be final.

Every command has one retry deadline (GPUGOV_RETRY_DEADLINE seconds, default 60): the time its
requests may spend failing and waiting to be tried again, all together. A command that reads
150,000 pods or applies 5,000 nodes takes longer than that when all is well, so the clock runs
only while requests fail; once it is spent the next failure is final, and the caller reports it
as incomplete (never as an empty or unchanged cluster).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Collection
from typing import Any

from urllib3.exceptions import ConnectTimeoutError, MaxRetryError, NewConnectionError, ReadTimeoutError, ResponseError
from urllib3.util.retry import Retry

DEADLINE_ENV = "GPUGOV_RETRY_DEADLINE"
DEFAULT_DEADLINE = 60.0  # seconds
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_AFTER_CAP = 10.0  # seconds: a longer Retry-After is waited this long, then tried again
BACKOFF_FACTOR = 0.5  # the first retry is at once, then 1 s, 2 s, 4 s, ... plus jitter
BACKOFF_JITTER = 0.5
BACKOFF_MAX = 8.0
STATUS_RETRIES = 10
READ_RETRIES = 5
CONNECT_RETRIES = 2
APPLY_PATCH = "application/apply-patch+yaml"
# Seconds an attempt waits for the connection to open and for each byte of the answer, by the
# number of stalls this request has had so far: a stall costs seconds, a slow server is waited for.
STALL_TIMEOUTS = (3.0, 8.0, 20.0)


class Stalled(Exception):
    """An attempt stalled and will be tried again with a longer timeout (DeadlineRetry.increment):
    `retry` is the request's Retry after counting the stall, to go on with."""

    def __init__(self, retry: DeadlineRetry) -> None:
        super().__init__("stalled")
        self.retry = retry


def is_stall(error: Exception | None) -> bool:
    """A timeout waiting for the connection or the answer (not a refused or reset connection)."""
    return isinstance(error, ReadTimeoutError) or (
        isinstance(error, ConnectTimeoutError) and not isinstance(error, NewConnectionError))


class DeadlineSpent(MaxRetryError):
    """No more tries: the command's retry deadline, or the retries of this request, are spent."""

    def __init__(self, pool: Any, url: str, reason: Exception | None, attempts: int) -> None:
        super().__init__(pool, url, reason)
        self.attempts = attempts


class RetryDeadline:
    """The seconds one command's requests may spend failing and waiting (shared by its threads)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spent = 0.0
        self._lock = threading.Lock()

    def charge(self, seconds: float) -> None:
        with self._lock:
            self.spent += max(0.0, seconds)

    @property
    def left(self) -> float:
        return self.seconds - self.spent


_DEADLINES: weakref.WeakKeyDictionary[Any, RetryDeadline] = weakref.WeakKeyDictionary()
_DEADLINES_LOCK = threading.Lock()


def deadline_seconds() -> float:
    """GPUGOV_RETRY_DEADLINE, or the default; ValueError when it is not a number of seconds >= 0."""
    raw = os.environ.get(DEADLINE_ENV, "").strip()
    if not raw:
        return DEFAULT_DEADLINE
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also NaN
        raise ValueError(f"{DEADLINE_ENV}={raw!r}: expected a number of seconds (0 or more)")
    return seconds


def deadline_of(api_client: Any) -> RetryDeadline:
    """The retry deadline of the command that made `api_client` (one client per command)."""
    with _DEADLINES_LOCK:
        deadline = _DEADLINES.get(api_client)
        if deadline is None:
            deadline = _DEADLINES[api_client] = RetryDeadline(deadline_seconds())
        return deadline


def is_safe(method: str, content_type: str = "") -> bool:
    """A request the API server may receive twice with the effect of once."""
    method = method.upper()
    return method in ("GET", "HEAD") or (method == "PATCH" and content_type.split(";")[0].strip() == APPLY_PATCH)


class DeadlineRetry(Retry):
    """urllib3's Retry that charges failing time to the command's deadline and stops when it is
    spent, with the number of attempts in the error it raises."""

    def __init__(self, *args: Any, deadline: RetryDeadline | None = None, began: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline or RetryDeadline(DEFAULT_DEADLINE)
        self.began = time.monotonic() if began is None else began  # when the current attempt began

    def new(self, **kw: Any) -> DeadlineRetry:
        kw.setdefault("deadline", self.deadline)
        kw.setdefault("began", self.began)
        return super().new(**kw)  # type: ignore[return-value]

    def get_retry_after(self, response: Any) -> float | None:
        seconds = super().get_retry_after(response)
        return None if seconds is None else min(seconds, RETRY_AFTER_CAP)

    def increment(self, method: str | None = None, url: str | None = None, response: Any = None,
                  error: Exception | None = None, _pool: Any = None, _stacktrace: Any = None) -> DeadlineRetry:
        now = time.monotonic()
        self.deadline.charge(now - self.began)
        attempts = len(self.history) + 1
        try:
            new = super().increment(method, url, response, error, _pool, _stacktrace)
        except DeadlineSpent:
            raise
        except MaxRetryError as exc:
            raise DeadlineSpent(_pool, url or "", exc.reason, attempts) from exc.reason
        assert isinstance(new, DeadlineRetry)
        retry_after = new.get_retry_after(response) if response is not None and self.respect_retry_after_header else None
        wait = retry_after if retry_after else new.get_backoff_time()
        if self.deadline.left < wait or self.deadline.left <= 0:
            reason = error or ResponseError(f"{getattr(response, 'status', '')} answered".strip())
            raise DeadlineSpent(_pool, url or "", reason, attempts) from error
        self.deadline.charge(wait)
        new.began = now + wait
        if is_stall(error) and new.stalls < len(STALL_TIMEOUTS):
            raise Stalled(new)  # the caller asks again with the next, longer timeout (timeouts())
        return new

    @property
    def stalls(self) -> int:
        """How many attempts of this request stalled so far."""
        return sum(1 for attempt in self.history if is_stall(attempt.error))

    def timeouts(self, safe: bool, connect: float, read: float) -> tuple[float, float]:
        """(connect, read) seconds for the next attempt, at most the given ones: short at first,
        longer after each stall; a request that may not be repeated waits the given read timeout."""
        step = STALL_TIMEOUTS[min(self.stalls, len(STALL_TIMEOUTS) - 1)]
        return min(connect, step), min(read, step) if safe else read


def retry_for(method: str, content_type: str, deadline: RetryDeadline) -> DeadlineRetry:
    """The Retry of one request: the full set when it is safe to repeat, else connect errors only."""
    safe = is_safe(method, content_type)
    allowed: Collection[str] = frozenset({method.upper()})
    return DeadlineRetry(
        total=None, connect=CONNECT_RETRIES, read=READ_RETRIES if safe else False,
        status=STATUS_RETRIES if safe else 0, other=0, redirect=3,
        allowed_methods=allowed, status_forcelist=RETRY_STATUSES if safe else (),
        respect_retry_after_header=safe, raise_on_status=False,
        backoff_factor=BACKOFF_FACTOR, backoff_jitter=BACKOFF_JITTER, backoff_max=BACKOFF_MAX,
        deadline=deadline,
    )
