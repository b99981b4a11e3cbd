"""One class per platform: the payload it takes, its size limits, its signing, its error replies.

Sizing works by dropping findings from the end until the platform's limit is met, so a message is
never cut mid-JSON or mid-character; the dropped ones are counted in an "…and N more" line.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import urlencode

from gpugov.i18n import current, translator
from gpugov.notify.message import Alert, finding_line, more_line, summary
from gpugov.notify.redact import redact, register_secrets, url_fragments
from gpugov.notify.transport import Reply, SendError, Transport, snippet


def dumps(payload: dict) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def feishu_sign(timestamp: str, secret: str) -> str:
    """Feishu/Lark custom bot: HMAC-SHA256 keyed with "timestamp\\nsecret" over an empty message."""
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def dingtalk_sign(timestamp_ms: str, secret: str) -> str:
    """DingTalk custom robot: HMAC-SHA256 keyed with the secret over "timestamp\\nsecret" (URL-encode it)."""
    digest = hmac.new(secret.encode(), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class Sink:
    kind: ClassVar[str] = ""
    formats: ClassVar[tuple[str, ...]] = ("",)
    default_max_findings: ClassVar[int] = 10

    def __init__(
        self,
        name: str,
        url: str,
        *,
        format: str = "",
        secret: str | None = None,
        transport: Transport | None = None,
        max_findings: int | None = None,
        clock: Callable[[], float] = time.time,
        language: str = "",
    ) -> None:
        self.name = name
        self.language = language or current()  # the fixed words of its messages (gpugov.i18n); JSON stays English
        self.tr = translator(self.language)
        self.format = format or self.formats[0]
        if self.format not in self.formats:
            raise ValueError(f"{self.kind} has no format {self.format!r}")
        self._url = url
        self._secret = secret or None
        self.transport = transport or Transport()
        self.max_findings = max_findings or self.default_max_findings
        self.clock = clock
        register_secrets([*url_fragments(url), *([secret] if secret else [])])
        self.redact = redact

    def __repr__(self) -> str:  # never the URL or secret
        return f"{type(self).__name__}(name={self.name!r}, format={self.format!r}, signed={self._secret is not None})"

    def send(self, alert: Alert, max_findings: int | None = None) -> int:
        """Deliver or raise SendError; return the number of HTTP attempts it took."""
        url, body, headers = self.request(alert, max_findings or self.max_findings)
        reply = self.transport.post(url, body, headers, self.redact)
        self.check(reply)
        return reply.attempts

    def request(self, alert: Alert, max_findings: int) -> tuple[str, bytes, dict[str, str]]:
        return self._url, self.body(alert, max_findings), {}

    def body(self, alert: Alert, max_findings: int) -> bytes:
        shown = min(max_findings, len(alert.findings))
        while True:
            payload = self.payload(alert, shown)
            body = dumps(payload)
            if shown == 0 or self.fits(payload, body):
                return body  # with no findings listed, title (clipped) and summary always fit
            shown -= 1

    def lines(self, alert: Alert, shown: int) -> list[str]:
        lines = [finding_line(f, tr=self.tr) for f in alert.findings[:shown]]
        if len(alert.findings) > shown:
            lines.append(more_line(len(alert.findings) - shown, self.tr))
        return lines

    def summary(self, alert: Alert) -> str:
        return summary(alert, self.tr)

    def payload(self, alert: Alert, shown: int) -> dict:
        raise NotImplementedError

    def fits(self, payload: dict, body: bytes) -> bool:
        return True

    def check(self, reply: Reply) -> None:
        """A 2xx reply can still carry a platform error; raise SendError for one."""

    def _reply_json(self, reply: Reply) -> dict[str, Any]:
        try:
            data = json.loads(reply.body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise SendError(f"unexpected reply (not a JSON object): {snippet(reply.body, self.redact)}", reply.attempts)
        return data

    def _platform_error(self, reply: Reply, code: Any, message: Any) -> None:
        text = snippet(str(message or "").encode(), self.redact)
        raise SendError(f"{self.kind} error {code}" + (f": {text}" if text else ""), reply.attempts)


class WebhookSink(Sink):
    """Any HTTP endpoint: the findings as JSON; with a secret, GitHub-style X-Gpugov-Signature-256."""

    kind = "webhook"
    formats = ("json",)
    default_max_findings = 200
    SIGNATURE_HEADER = "X-Gpugov-Signature-256"

    def payload(self, alert: Alert, shown: int) -> dict:
        return {
            "source": "gpugov",
            "title": alert.title,
            "status": alert.status,
            "fingerprint": alert.fingerprint,
            "summary": {**alert.counts, "total": len(alert.findings)},
            "findings": [f.to_dict() for f in alert.findings[:shown]],
            "omitted": len(alert.findings) - shown,
        }

    def request(self, alert: Alert, max_findings: int) -> tuple[str, bytes, dict[str, str]]:
        body = self.body(alert, max_findings)
        headers = {}
        if self._secret:
            digest = hmac.new(self._secret.encode(), body, hashlib.sha256).hexdigest()
            headers[self.SIGNATURE_HEADER] = f"sha256={digest}"
        return self._url, body, headers


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackSink(Sink):
    """Slack incoming webhook: Block Kit (header, summary, findings) or plain mrkdwn text."""

    kind = "slack"
    formats = ("blocks", "text")
    HEADER_LIMIT = 150  # plain_text in a header block
    SECTION_LIMIT = 3000  # text in a section block
    TEXT_LIMIT = 40000  # top-level text

    def payload(self, alert: Alert, shown: int) -> dict:
        items = [_slack_escape(line) for line in self.lines(alert, shown)]
        title, summary = _slack_escape(alert.title), _slack_escape(self.summary(alert))
        if self.format == "text":
            return {"text": "\n".join([f"*{title}*", summary, *(f"• {i}" for i in items)])}
        findings = [f"• {i}" for i in items[:shown]]
        blocks: list[dict] = [
            {"type": "header", "text": {"type": "plain_text", "text": alert.title[: self.HEADER_LIMIT]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{summary}*"}},
        ]
        if findings:
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(findings)}})
        if len(items) > shown:
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": items[-1]}]})
        return {"text": f"{alert.title}: {self.summary(alert)}", "blocks": blocks}

    def fits(self, payload: dict, body: bytes) -> bool:
        if "blocks" not in payload:
            return len(payload["text"]) <= self.TEXT_LIMIT
        sections = [b["text"]["text"] for b in payload["blocks"] if b["type"] == "section"]
        return all(len(text) <= self.SECTION_LIMIT for text in sections)


class FeishuSink(Sink):
    """Feishu/Lark custom bot: msg_type post (rich text) or text; optional signature in the body."""

    kind = "feishu"
    formats = ("post", "text")
    BODY_LIMIT = 20 * 1024  # request body, per Feishu's custom-bot guide

    def payload(self, alert: Alert, shown: int) -> dict:
        lines = self.lines(alert, shown)
        payload: dict[str, Any]
        if self.format == "text":
            payload = {"msg_type": "text", "content": {"text": "\n".join([alert.title, self.summary(alert), *lines])}}
        else:
            rows = [[{"tag": "text", "text": text}] for text in [self.summary(alert), *lines]]
            payload = {"msg_type": "post", "content": {"post": {"zh_cn": {"title": alert.title, "content": rows}}}}
        if self._secret:
            timestamp = str(int(self.clock()))  # seconds; Feishu rejects one more than an hour off
            payload = {"timestamp": timestamp, "sign": feishu_sign(timestamp, self._secret), **payload}
        return payload

    def fits(self, payload: dict, body: bytes) -> bool:
        return len(body) <= self.BODY_LIMIT

    def check(self, reply: Reply) -> None:
        data = self._reply_json(reply)
        code = data.get("code", data.get("StatusCode"))  # StatusCode: the older v2 hook reply
        if code != 0:
            self._platform_error(reply, code, data.get("msg", data.get("StatusMessage")))


class DingTalkSink(Sink):
    """DingTalk custom robot: markdown or text; with a secret, timestamp and sign go in the query."""

    kind = "dingtalk"
    formats = ("markdown", "text")
    BODY_LIMIT = 20000  # bytes; DingTalk does not document an exact figure for every type

    def payload(self, alert: Alert, shown: int) -> dict:
        lines = self.lines(alert, shown)
        if self.format == "text":
            return {"msgtype": "text", "text": {"content": "\n".join([alert.title, self.summary(alert), *lines])}}
        items = [f"- {line}" for line in lines]
        text = "\n\n".join([f"#### {alert.title}", f"**{self.summary(alert)}**", "\n".join(items)]).rstrip()
        return {"msgtype": "markdown", "markdown": {"title": alert.title, "text": text}}

    def fits(self, payload: dict, body: bytes) -> bool:
        return len(body) <= self.BODY_LIMIT

    def request(self, alert: Alert, max_findings: int) -> tuple[str, bytes, dict[str, str]]:
        url = self._url
        if self._secret:
            timestamp = str(int(self.clock() * 1000))  # milliseconds; valid for an hour
            query = urlencode({"timestamp": timestamp, "sign": dingtalk_sign(timestamp, self._secret)})
            url = f"{url}{'&' if '?' in url else '?'}{query}"
        return url, self.body(alert, max_findings), {}

    def check(self, reply: Reply) -> None:
        data = self._reply_json(reply)
        if data.get("errcode") != 0:
            self._platform_error(reply, data.get("errcode"), data.get("errmsg"))


class WeComSink(Sink):
    """WeCom (WeChat Work) group bot: markdown (4096 bytes of content) or text (2048 bytes)."""

    kind = "wecom"
    formats = ("markdown", "text")
    LIMITS: ClassVar[dict[str, int]] = {"markdown": 4096, "text": 2048}

    def payload(self, alert: Alert, shown: int) -> dict:
        lines = self.lines(alert, shown)
        if self.format == "text":
            return {"msgtype": "text", "text": {"content": "\n".join([alert.title, self.summary(alert), *lines])}}
        color = "info" if alert.resolved else "warning"
        head = [f"**{alert.title}**", f'> <font color="{color}">{self.summary(alert)}</font>']
        return {"msgtype": "markdown", "markdown": {"content": "\n".join([*head, *(f"- {line}" for line in lines)])}}

    def fits(self, payload: dict, body: bytes) -> bool:
        content = payload[self.format]["content"]
        return len(content.encode()) <= self.LIMITS[self.format]

    def check(self, reply: Reply) -> None:
        data = self._reply_json(reply)
        if data.get("errcode") != 0:
            self._platform_error(reply, data.get("errcode"), data.get("errmsg"))


SINKS: dict[str, type[Sink]] = {cls.kind: cls for cls in (WebhookSink, SlackSink, FeishuSink, DingTalkSink, WeComSink)}
