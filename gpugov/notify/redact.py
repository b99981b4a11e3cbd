"""Keep webhook URLs and signing secrets out of messages, results and logs.

Chat webhooks carry their credential in the URL itself (Slack's path, DingTalk's access_token, WeCom's
key, Feishu's hook id), so the URL as a whole, its path, its query and each long segment or value count
as secrets. urllib3 logs request paths at DEBUG level; a filter on its logger scrubs every secret
this process has registered, so turning on debug logging does not leak them either.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

REDACTED = "[redacted]"
_MIN_FRAGMENT = 8  # shorter path segments ("send", "robot") are not credentials
_MIN_SECRET = 3


def url_fragments(url: str) -> list[str]:
    """The parts of a webhook URL that can identify (and so authorise) the hook."""
    parts = urlsplit(url)
    fragments = [url, url.split("://", 1)[-1], parts.query]
    # With a query, the credential is there (DingTalk, WeCom); "/robot/send" alone is no secret.
    fragments.append(f"{parts.path}?{parts.query}" if parts.query else parts.path)
    fragments += [seg for seg in parts.path.split("/") if len(seg) >= _MIN_FRAGMENT]
    for _, value in parse_qsl(parts.query, keep_blank_values=False):
        fragments += [value, quote(value, safe=""), quote_plus(value)]
    return [f for f in fragments if len(f) >= _MIN_FRAGMENT and f != "/"]


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        self._secrets.update(s for s in secrets if s and len(s) >= _MIN_SECRET)
        self._ordered = sorted(self._secrets, key=len, reverse=True)  # longest first: no half-redacted URLs

    def __call__(self, text: str) -> str:
        for secret in self._ordered:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text


class _ScrubFilter(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.redact = Redactor()
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


_SCRUB = _ScrubFilter()
# Loggers that may print a request URL: urllib3's connection pool ("POST /services/T0/B0/XXXX") and ours.
_LOGGERS = ("urllib3.connectionpool", "urllib3.util.retry", "requests", "gpugov.notify")


def redact(text: str) -> str:
    """Replace every secret registered in this process (any sink's, not only the caller's)."""
    return _SCRUB.redact(text)


def register_secrets(secrets: Iterable[str]) -> None:
    """Scrub these strings from the loggers above from now on (process-wide)."""
    with _SCRUB.lock:
        _SCRUB.redact.add(secrets)
        for name in _LOGGERS:
            logger = logging.getLogger(name)
            if _SCRUB not in logger.filters:
                logger.addFilter(_SCRUB)
