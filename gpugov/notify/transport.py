"""POST with timeouts and bounded retries: 5xx and connection errors back off, 429 waits Retry-After.

Nothing here puts a URL or a response header into an error: errors name the HTTP status, the
retry count and at most a short, redacted piece of the platform's reply.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from gpugov.notify.redact import register_secrets, url_fragments

if TYPE_CHECKING:
    import requests


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # tries in all, the first included
    backoff_s: float = 1.0  # wait before retry n: backoff_s * 2**(n-1), at most max_backoff_s
    max_backoff_s: float = 30.0
    retry_after_cap_s: float = 60.0  # a longer Retry-After fails now instead of blocking a CI job
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 15.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1")

    def backoff(self, attempt: int) -> float:
        return min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)


class SendError(Exception):
    """A message was not delivered. The text is safe to print: it holds no URL or secret."""

    def __init__(self, message: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    attempts: int


def retry_after_seconds(value: str | None, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> float | None:
    """Retry-After is either delay-seconds or an HTTP-date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now()).total_seconds())


def snippet(body: bytes, redact: Callable[[str], str], limit: int = 200) -> str:
    text = " ".join(body.decode("utf-8", errors="replace").split())
    text = redact(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Transport:
    def __init__(
        self,
        policy: RetryPolicy | None = None,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import requests  # here, so that `gpugov notify --help` works without the notify extra

        self.policy = policy or RetryPolicy()
        self.session = session or requests.Session()
        self.sleep = sleep

    def post(self, url: str, body: bytes, headers: dict[str, str], redact: Callable[[str], str]) -> Reply:
        import requests

        register_secrets(url_fragments(url))  # signed URLs change per request; scrub this one too
        policy = self.policy
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": "gpugov-notify", **headers}
        for attempt in range(1, policy.attempts + 1):
            try:
                response = self.session.post(
                    url,
                    data=body,
                    headers=headers,
                    timeout=(policy.connect_timeout_s, policy.read_timeout_s),
                    allow_redirects=False,  # a webhook that redirects would send the alert elsewhere
                )
            except requests.Timeout:
                why, wait = "timed out", policy.backoff(attempt)
            except requests.ConnectionError:
                why, wait = "connection failed", policy.backoff(attempt)
            except requests.RequestException as exc:
                raise SendError(f"request failed ({type(exc).__name__})", attempt) from None
            else:
                status, content = response.status_code, response.content
                if 200 <= status < 300:
                    return Reply(status, content, attempt)
                if status == 429:
                    told = retry_after_seconds(response.headers.get("Retry-After"))
                    if told is not None and told > policy.retry_after_cap_s:
                        raise SendError(
                            f"HTTP 429: rate limited, Retry-After {told:.0f}s is over the {policy.retry_after_cap_s:.0f}s cap",
                            attempt,
                        )
                    why, wait = "HTTP 429: rate limited", policy.backoff(attempt) if told is None else told
                elif status >= 500:
                    why, wait = f"HTTP {status}", policy.backoff(attempt)
                else:  # 3xx and 4xx: the request itself is wrong; sending it again will not help
                    detail = snippet(content, redact)
                    raise SendError(f"HTTP {status}" + (f": {detail}" if detail else ""), attempt)
            if attempt == policy.attempts:
                raise SendError(f"{why} (gave up after {attempt} attempts)", attempt)
            self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover
