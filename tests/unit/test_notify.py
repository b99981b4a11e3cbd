"""Alert sinks against a real local HTTP server: payloads, signatures, retries, dedup, no leaked secrets."""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import logging
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import requests

from gpugov.findings import Finding, Level, Location
from gpugov.findings.report import as_json
from gpugov.notify import NotifyConfigError, RetryPolicy, SendError, Transport, build_sinks, notify
from gpugov.notify import cli as notify_cli
from gpugov.notify.dedup import fingerprint, load_state
from gpugov.notify.message import Alert, clip_bytes
from gpugov.notify.redact import REDACTED, url_fragments
from gpugov.notify.sinks import dingtalk_sign, feishu_sign
from gpugov.notify.transport import retry_after_seconds
from tests.helpers.local_http import serving

# Credentials as the platforms shape them: in the path (Slack, Feishu) or the query (DingTalk, WeCom).
SLACK_PATH = "/services/T0SECRET1/B0SECRET2/xoxbSlackHookToken9f8e7d6c"
FEISHU_PATH = "/open-apis/bot/v2/hook/5e3d587e-d78e-4a07-bd07-feishuhook001"
FEISHU_SECRET = "feishu-signing-secret-nIMtb7r3N9"
DINGTALK_TOKEN = "dingtalkAccessToken0123456789abcdef"
DINGTALK_SECRET = "SECdingtalk-signing-secret-77aa"
WECOM_KEY = "693a91f6-7aaa-4bc4-97a0-wecomkey0001"
WEBHOOK_PATH = "/hooks/gpugov/generic-hook-token-42x"
WEBHOOK_SECRET = "generic-webhook-hmac-secret-q1w2"
SECRETS = [
    SLACK_PATH,
    "xoxbSlackHookToken9f8e7d6c",
    FEISHU_PATH,
    "5e3d587e-d78e-4a07-bd07-feishuhook001",
    FEISHU_SECRET,
]
SECRETS += [DINGTALK_TOKEN, DINGTALK_SECRET, WECOM_KEY, WEBHOOK_PATH, "generic-hook-token-42x", WEBHOOK_SECRET]

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


# --- a webhook receiver ---------------------------------------------------------------------------


@dataclass
class Seen:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)


# Success as each platform says it: DingTalk/WeCom errcode 0, Feishu code 0; Slack's "ok" is not parsed.
OK_BODY = b'{"errcode":0,"errmsg":"ok","code":0,"msg":"success"}'


@dataclass
class Answer:
    status: int = 200
    body: bytes = OK_BODY
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class Receiver:
    """Records every POST; answers from a script, then with `default`."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.script: list[Answer] = []
        self.default = Answer()
        self.lock = threading.Lock()
        self.base = ""

    def answer(self, *answers: Answer) -> None:
        self.script = list(answers)

    def next_answer(self) -> Answer:
        with self.lock:
            return self.script.pop(0) if self.script else self.default

    def url(self, path: str) -> str:
        return self.base + path


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            split = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(split.query))
            with rec.lock:
                rec.seen.append(Seen(split.path, query, dict(self.headers), body))
            answer = rec.next_answer()
            if answer.delay:
                time.sleep(answer.delay)
            try:
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out first

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as url:
        rec.base = url
        yield rec


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def transport(sleeps) -> Transport:
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment between us and 127.0.0.1
    policy = RetryPolicy(attempts=3, backoff_s=0.5, retry_after_cap_s=10, connect_timeout_s=2, read_timeout_s=5)
    return Transport(policy, session, sleep=sleeps.append)


def env_for(rec: Receiver) -> dict[str, str]:
    return {
        "GPUGOV_WEBHOOK_URL": rec.url(WEBHOOK_PATH),
        "GPUGOV_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "GPUGOV_SLACK_WEBHOOK_URL": rec.url(SLACK_PATH),
        "GPUGOV_FEISHU_WEBHOOK_URL": rec.url(FEISHU_PATH),
        "GPUGOV_FEISHU_SECRET": FEISHU_SECRET,
        "GPUGOV_DINGTALK_WEBHOOK_URL": rec.url(f"/robot/send?access_token={DINGTALK_TOKEN}"),
        "GPUGOV_DINGTALK_SECRET": DINGTALK_SECRET,
        "GPUGOV_WECOM_WEBHOOK_URL": rec.url(f"/cgi-bin/webhook/send?key={WECOM_KEY}"),
    }


def sink(spec: str, rec: Receiver, transport: Transport, **env: str):
    (built,) = build_sinks([spec], {**env_for(rec), **env}, None, transport=transport)
    return built


FINDINGS = [
    Finding("GG101", Level.WARNING, "pool a100 is 92% allocated", Location("hardware/pools.yaml", 12, 3)),
    Finding("GG012", Level.ERROR, "tenant ml-research quota exceeds pool capacity", Location("tenants/ml.yaml", 4, 3)),
    Finding("GG040", Level.ERROR, "MIG layout 4g+4g does not fit an A100-80GB", Location("hardware/nodes.yaml", 30, 5)),
]


def many(n: int, message: str = "finding") -> list[Finding]:
    return [
        Finding(f"GG{i:03d}", Level.ERROR, f"{message} {i}", Location(f"tenants/t{i}.yaml", 1, 1)) for i in range(n)
    ]


def send(
    spec: str,
    rec: Receiver,
    transport: Transport,
    findings: list[Finding] = FINDINGS,
    title: str = "gpugov: prod",
    **env: str,
):
    alert = Alert.of(title, findings, fingerprint(findings))
    return sink(spec, rec, transport, **env).send(alert)


# --- payloads per platform ------------------------------------------------------------------------


def test_webhook_payload_and_hmac(receiver, transport):
    assert send("webhook", receiver, transport) == 1
    (seen,) = receiver.seen
    assert seen.path == WEBHOOK_PATH and seen.headers["Content-Type"] == "application/json; charset=utf-8"
    data = seen.json
    assert data["source"] == "gpugov" and data["title"] == "gpugov: prod" and data["status"] == "firing"
    assert data["summary"] == {**dict.fromkeys(Level, 0), "error": 2, "warning": 1, "total": 3}
    assert data["omitted"] == 0
    assert [f["rule"] for f in data["findings"]] == ["GG040", "GG012", "GG101"]  # errors first, then by file
    assert data["findings"][0] == FINDINGS[2].to_dict()
    expected = hmac.new(WEBHOOK_SECRET.encode(), seen.body, hashlib.sha256).hexdigest()
    assert seen.headers["X-Gpugov-Signature-256"] == f"sha256={expected}"


def test_webhook_without_secret_is_unsigned(receiver, transport):
    send("webhook", receiver, transport, GPUGOV_WEBHOOK_SECRET="")
    assert "X-Gpugov-Signature-256" not in receiver.seen[0].headers


def test_slack_blocks(receiver, transport):
    findings = [*FINDINGS, Finding("GG999", Level.ERROR, "a <b> & c", None)]
    send("slack", receiver, transport, findings)
    data = receiver.seen[0].json
    assert receiver.seen[0].path == SLACK_PATH
    assert data["text"] == "gpugov: prod: 3 errors, 1 warning"
    header, summary, listing = data["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": "gpugov: prod"}}
    assert summary["text"] == {"type": "mrkdwn", "text": "*3 errors, 1 warning*"}
    lines = listing["text"]["text"].split("\n")
    assert lines[0] == "• [error] GG999 a &lt;b&gt; &amp; c"
    assert lines[1] == "• [error] GG040 hardware/nodes.yaml:30:5: MIG layout 4g+4g does not fit an A100-80GB"


def test_slack_text_and_more_line(receiver, transport):
    send("slack:text", receiver, transport, many(14))
    text = receiver.seen[0].json["text"]
    assert set(receiver.seen[0].json) == {"text"}
    lines = text.split("\n")
    assert lines[:2] == ["*gpugov: prod*", "14 errors"]
    assert len(lines) == 2 + 10 + 1 and lines[-1] == "• …and 4 more findings"


def test_slack_sections_stay_under_3000_chars(receiver, transport):
    send("slack", receiver, transport, many(10, "x" * 400))
    blocks = receiver.seen[0].json["blocks"]
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks if b["type"] == "section")
    assert blocks[-1]["type"] == "context" and "more finding" in blocks[-1]["elements"][0]["text"]


def test_feishu_post_signed(receiver, transport):
    before = int(time.time())
    send("feishu", receiver, transport)
    seen = receiver.seen[0]
    data = seen.json
    assert seen.path == FEISHU_PATH and data["msg_type"] == "post"
    post = data["content"]["post"]["zh_cn"]
    assert post["title"] == "gpugov: prod"
    assert post["content"][0] == [{"tag": "text", "text": "2 errors, 1 warning"}]
    assert post["content"][1][0]["text"].startswith("[error] GG040 hardware/nodes.yaml:30:5")
    # Feishu's algorithm, recomputed here: key "timestamp\nsecret", empty message, base64.
    assert before <= int(data["timestamp"]) <= int(time.time())
    key = f"{data['timestamp']}\n{FEISHU_SECRET}".encode()
    assert data["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def test_feishu_text_unsigned(receiver, transport):
    receiver.default = Answer(body=b'{"code":0,"msg":"success","data":{}}')
    send("feishu:text", receiver, transport, GPUGOV_FEISHU_SECRET="")
    data = receiver.seen[0].json
    assert set(data) == {"msg_type", "content"} and data["msg_type"] == "text"
    assert data["content"]["text"].split("\n")[:2] == ["gpugov: prod", "2 errors, 1 warning"]


def test_feishu_body_stays_under_20kb(receiver, transport):
    send("feishu", receiver, transport, many(200, "队列配额超出" * 40))
    assert len(receiver.seen[0].body) <= 20 * 1024


def test_dingtalk_markdown_signed(receiver, transport):
    before = int(time.time() * 1000)
    send("dingtalk", receiver, transport)
    seen = receiver.seen[0]
    assert seen.path == "/robot/send" and seen.query["access_token"] == DINGTALK_TOKEN
    timestamp = seen.query["timestamp"]
    assert before <= int(timestamp) <= int(time.time() * 1000)
    # DingTalk's algorithm: key = secret, message = "timestamp\nsecret"; parse_qsl undid the URL-encoding.
    digest = hmac.new(DINGTALK_SECRET.encode(), f"{timestamp}\n{DINGTALK_SECRET}".encode(), hashlib.sha256).digest()
    assert seen.query["sign"] == base64.b64encode(digest).decode() == dingtalk_sign(timestamp, DINGTALK_SECRET)
    data = seen.json
    assert data["msgtype"] == "markdown" and data["markdown"]["title"] == "gpugov: prod"
    text = data["markdown"]["text"]
    assert text.startswith("#### gpugov: prod\n\n**2 errors, 1 warning**\n\n- [error] GG040")


def test_dingtalk_text(receiver, transport):
    send("dingtalk:text", receiver, transport, GPUGOV_DINGTALK_SECRET="")
    seen = receiver.seen[0]
    assert set(seen.query) == {"access_token"}
    assert seen.json["msgtype"] == "text" and seen.json["text"]["content"].startswith("gpugov: prod\n")


def test_dingtalk_sign_is_url_encoded_in_the_query(receiver, transport):
    url = sink("dingtalk", receiver, transport).request(Alert.of("t", FINDINGS, "fp"), 10)[0]
    raw_sign = url.split("sign=", 1)[1]
    assert "+" not in raw_sign and "/" not in raw_sign and "=" not in raw_sign  # base64 specials escaped


def test_wecom_markdown_fits_4096_bytes(receiver, transport):
    send("wecom", receiver, transport, many(30, "租户配额超出了资源池容量" * 10))
    seen = receiver.seen[0]
    assert seen.path == "/cgi-bin/webhook/send" and seen.query == {"key": WECOM_KEY}
    content = seen.json["markdown"]["content"]
    assert seen.json["msgtype"] == "markdown" and len(content.encode()) <= 4096
    assert content.startswith('**gpugov: prod**\n> <font color="warning">30 errors</font>\n- [error]')
    assert "more findings" in content.splitlines()[-1]


def test_wecom_text_fits_2048_bytes(receiver, transport):
    send("wecom:text", receiver, transport, many(30, "配额" * 60))
    assert len(receiver.seen[0].json["text"]["content"].encode()) <= 2048


def test_title_and_lines_are_clipped():
    alert = Alert.of("t" * 500, [Finding("R", Level.ERROR, "m" * 1000)], "fp")
    assert len(alert.title) == 100 and alert.title.endswith("…")
    assert clip_bytes("配额配额", 7) == "配…"


# --- platform errors inside 200 and HTTP errors ----------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "reply", "words"),
    [
        ("dingtalk", b'{"errcode":310000,"errmsg":"sign not match"}', "dingtalk error 310000: sign not match"),
        ("wecom", b'{"errcode":93000,"errmsg":"invalid webhook url"}', "wecom error 93000: invalid webhook url"),
        ("feishu", b'{"code":19021,"msg":"sign match fail"}', "feishu error 19021: sign match fail"),
        ("feishu", b'{"StatusCode":9499,"StatusMessage":"Bad Request"}', "feishu error 9499: Bad Request"),
        ("dingtalk", b"<html>proxy</html>", "unexpected reply (not a JSON object)"),
    ],
)
def test_platform_errors_in_200_replies_fail(receiver, transport, spec, reply, words):
    receiver.default = Answer(200, reply)
    with pytest.raises(SendError, match=words.replace("(", r"\(").replace(")", r"\)")) as caught:
        send(spec, receiver, transport)
    assert len(receiver.seen) == 1 and caught.value.attempts == 1  # a platform error is not retried


def test_platform_error_text_is_redacted(receiver, transport):
    receiver.default = Answer(
        200, json.dumps({"errcode": 300001, "errmsg": f"token {DINGTALK_TOKEN} invalid"}).encode()
    )
    with pytest.raises(SendError) as caught:
        send("dingtalk", receiver, transport)
    assert DINGTALK_TOKEN not in str(caught.value) and REDACTED in str(caught.value)


def test_5xx_is_retried_with_backoff(receiver, transport, sleeps):
    receiver.answer(Answer(500, b"oops"), Answer(503, b"busy"))
    assert send("slack", receiver, transport) == 3
    assert len(receiver.seen) == 3 and sleeps == [0.5, 1.0]


def test_retries_are_bounded(receiver, transport, sleeps):
    receiver.default = Answer(502, b"bad gateway")
    with pytest.raises(SendError, match=r"HTTP 502 \(gave up after 3 attempts\)") as caught:
        send("slack", receiver, transport)
    assert caught.value.attempts == 3 and len(receiver.seen) == 3 and sleeps == [0.5, 1.0]


def test_4xx_is_not_retried(receiver, transport, sleeps):
    receiver.default = Answer(400, b"invalid_payload")
    with pytest.raises(SendError, match="HTTP 400: invalid_payload"):
        send("slack", receiver, transport)
    assert len(receiver.seen) == 1 and sleeps == []


def test_429_waits_retry_after(receiver, transport, sleeps):
    receiver.answer(Answer(429, b"slow down", {"Retry-After": "3"}))
    assert send("slack", receiver, transport) == 2
    assert sleeps == [3.0]


def test_429_without_retry_after_backs_off(receiver, transport, sleeps):
    receiver.answer(Answer(429, b""))
    send("slack", receiver, transport)
    assert sleeps == [0.5]


def test_429_beyond_the_cap_fails_at_once(receiver, transport, sleeps):
    receiver.default = Answer(429, b"", {"Retry-After": "3600"})
    with pytest.raises(SendError, match="Retry-After 3600s is over the 10s cap"):
        send("slack", receiver, transport)
    assert len(receiver.seen) == 1 and sleeps == []


def test_retry_after_http_date():
    now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=42), usegmt=True), lambda: now) == 42
    assert retry_after_seconds(format_datetime(now - timedelta(seconds=5), usegmt=True), lambda: now) == 0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_redirects_are_not_followed(receiver, transport):
    receiver.default = Answer(302, b"", {"Location": "http://127.0.0.1:1/elsewhere"})
    with pytest.raises(SendError, match="HTTP 302"):
        send("webhook", receiver, transport)
    assert len(receiver.seen) == 1


def test_connection_refused_is_retried_then_fails(transport, sleeps):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rec = Receiver()
    rec.base = f"http://127.0.0.1:{port}"
    with pytest.raises(SendError, match=r"connection failed \(gave up after 3 attempts\)") as caught:
        send("slack", rec, transport)
    assert caught.value.attempts == 3 and sleeps == [0.5, 1.0]
    assert SLACK_PATH not in str(caught.value)


def test_read_timeout(receiver):
    receiver.answer(Answer(200, b"ok", delay=1.0))
    quick = Transport(RetryPolicy(attempts=1, read_timeout_s=0.2), requests.Session(), sleep=lambda s: None)
    quick.session.trust_env = False
    with pytest.raises(SendError, match="timed out"):
        send("slack", receiver, quick)


# --- dedup --------------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def run(findings, sinks, state: Path, clock: Clock, window: timedelta = timedelta(hours=24)):
    return notify(findings, sinks, state, window, "gpugov: prod", clock=clock)


def test_unchanged_findings_are_not_resent_within_the_window(receiver, transport, tmp_path):
    sinks = build_sinks(["slack", "webhook"], env_for(receiver), None, transport=transport)
    state, clock = tmp_path / "state.json", Clock()
    first = run(FINDINGS, sinks, state, clock)
    assert first.sent == ["slack", "webhook"] and first.ok and len(receiver.seen) == 2
    clock.now += timedelta(hours=23)
    shuffled = [FINDINGS[2], FINDINGS[0], FINDINGS[1], FINDINGS[0]]  # order and repeats do not matter
    again = run(shuffled, sinks, state, clock)
    assert again.skipped == ["slack", "webhook"] and len(receiver.seen) == 2
    assert again.outcomes[0].reason == "unchanged since 2026-03-01 09:00 UTC"
    moved = [Finding(f.rule, f.level, f.message, Location(f.location.file, f.location.line + 7)) for f in FINDINGS]
    assert run(moved, sinks, state, clock).skipped == ["slack", "webhook"]  # lines moved, same objects
    clock.now += timedelta(hours=1)  # 24h after the first send
    assert run(FINDINGS, sinks, state, clock).sent == ["slack", "webhook"]


def test_a_changed_set_is_sent_at_once(receiver, transport, tmp_path):
    sinks = build_sinks(["slack"], env_for(receiver), None, transport=transport)
    state, clock = tmp_path / "state.json", Clock()
    run(FINDINGS, sinks, state, clock)
    clock.now += timedelta(minutes=5)
    changed = [*FINDINGS[:2], Finding("GG040", Level.ERROR, "MIG layout 7x1g+1g does not fit", FINDINGS[2].location)]
    assert run(changed, sinks, state, clock).sent == ["slack"]
    assert run(changed[:2], sinks, state, clock).sent == ["slack"]  # one fixed: also a change


def test_resolved_is_sent_once(receiver, transport, tmp_path):
    sinks = build_sinks(["webhook"], env_for(receiver), None, transport=transport)
    state, clock = tmp_path / "state.json", Clock()
    assert run([], sinks, state, clock).outcomes[0].reason == "no findings"
    assert not state.exists() and receiver.seen == []
    run(FINDINGS, sinks, state, clock)
    resolved = run([], sinks, state, clock)
    assert resolved.sent == ["webhook"] and resolved.outcomes[0].reason == "resolved"
    data = receiver.seen[-1].json
    assert data["status"] == "resolved" and data["findings"] == [] and data["summary"]["total"] == 0
    clock.now += timedelta(days=3)
    assert run([], sinks, state, clock).skipped == ["webhook"] and len(receiver.seen) == 2


def test_a_failed_sink_is_tried_again_next_run(receiver, transport, tmp_path):
    sinks = build_sinks(["slack", "webhook"], env_for(receiver), None, transport=transport)
    state, clock = tmp_path / "state.json", Clock()
    receiver.answer(Answer(400, b"no_service"))  # the first request (slack) fails
    result = run(FINDINGS, sinks, state, clock)
    assert result.failed == ["slack"] and result.sent == ["webhook"] and not result.ok
    assert result.outcomes[0].reason == "HTTP 400: no_service" and result.outcomes[0].attempts == 1
    assert set(load_state(state)) == {"webhook"}
    again = run(FINDINGS, sinks, state, clock)
    assert again.sent == ["slack"] and again.skipped == ["webhook"]


def test_state_file_is_written_atomically(receiver, transport, tmp_path):
    sinks = build_sinks(["slack"], env_for(receiver), None, transport=transport)
    state = tmp_path / "nested" / "state.json"
    run(FINDINGS, sinks, state, Clock())
    data = json.loads(state.read_text())
    assert data["version"] == 1 and data["sinks"]["slack"]["findings"] == 3
    assert data["sinks"]["slack"]["fingerprint"] == fingerprint(FINDINGS)
    assert data["sinks"]["slack"]["sent_at"] == "2026-03-01T09:00:00+00:00"
    assert [p.name for p in state.parent.iterdir()] == ["state.json"]  # no temp file left behind


def test_a_corrupt_state_file_is_ignored(receiver, transport, tmp_path, caplog):
    state = tmp_path / "state.json"
    state.write_text("{not json")
    sinks = build_sinks(["slack"], env_for(receiver), None, transport=transport)
    assert run(FINDINGS, sinks, state, Clock()).sent == ["slack"]
    assert "ignoring notification state" in caplog.text
    assert json.loads(state.read_text())["version"] == 1


def test_an_unwritable_state_file_is_reported(receiver, transport, tmp_path):
    state = tmp_path / "state.json"
    state.mkdir()  # a directory where the file should go
    result = run(FINDINGS, build_sinks(["slack"], env_for(receiver), None, transport=transport), state, Clock())
    assert result.sent == ["slack"] and result.state_error and "cannot write" in result.state_error


def test_fingerprint_is_stable():
    assert fingerprint(FINDINGS) == fingerprint(list(reversed(FINDINGS))) != fingerprint(FINDINGS[:2])
    assert fingerprint([]) == fingerprint([])


def test_max_findings(receiver, transport, tmp_path):
    sinks = build_sinks(["slack:text"], env_for(receiver), None, transport=transport)
    notify(many(20), sinks, tmp_path / "s.json", title="t", max_findings=3, clock=Clock())
    assert receiver.seen[0].json["text"].split("\n")[-1] == "• …and 17 more findings"


# --- secrets stay secret --------------------------------------------------------------------------


def test_secrets_never_reach_logs_results_or_errors(receiver, transport, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)  # urllib3 logs each request line at DEBUG
    specs = ["webhook", "slack", "feishu", "dingtalk", "wecom"]
    sinks = build_sinks(specs, env_for(receiver), None, transport=transport)
    receiver.answer(Answer(500), Answer(200), Answer(200), Answer(400, f"bad {FEISHU_PATH}".encode()))
    receiver.default = Answer(200, json.dumps({"errcode": 1, "errmsg": f"key {WECOM_KEY}", "code": 1}).encode())
    result = notify(FINDINGS, sinks, tmp_path / "state.json", title="t", clock=Clock())
    assert result.sent == ["webhook", "slack"] and result.failed == ["feishu", "dingtalk", "wecom"]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = {"GPUGOV_SLACK_WEBHOOK_URL": dead + SLACK_PATH}
    down = notify(FINDINGS, build_sinks(["slack"], env, None, transport=transport), tmp_path / "s2.json", clock=Clock())
    assert down.failed == ["slack"]

    texts = [r.getMessage() for r in caplog.records]
    texts += [
        json.dumps(result.to_dict()),
        json.dumps(down.to_dict()),
        *map(repr, sinks),
        (tmp_path / "state.json").read_text(),
    ]
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, (secret, text)
    request_lines = [
        r.getMessage() for r in caplog.records if r.name == "urllib3.connectionpool" and "POST" in r.getMessage()
    ]
    assert request_lines and all(REDACTED in line for line in request_lines)  # the filter did work


def test_config_errors_do_not_quote_values(tmp_path):
    bad_url = f"ftp://hooks.example/{WECOM_KEY}"
    with pytest.raises(NotifyConfigError) as caught:
        build_sinks(["wecom"], {"GPUGOV_WECOM_WEBHOOK_URL": bad_url}, None)
    assert str(caught.value) == "sink wecom: GPUGOV_WECOM_WEBHOOK_URL is not an http(s) URL"
    broken_yaml = tmp_path / "notify.yaml"
    broken_yaml.write_text(f'slack:\n  webhook_url: "https://hooks.slack.com{SLACK_PATH}\n  : [\n')
    with pytest.raises(NotifyConfigError) as caught:
        build_sinks(["slack"], {}, broken_yaml)
    assert SLACK_PATH not in str(caught.value) and "not valid YAML" in str(caught.value)
    broken_env = tmp_path / "notify.env"
    broken_env.write_text(f"GPUGOV_DINGTALK_SECRET={DINGTALK_SECRET}\nthis line has {DINGTALK_TOKEN}\n")
    with pytest.raises(NotifyConfigError, match=r"notify.env:2: expected NAME=VALUE") as caught:
        build_sinks(["dingtalk"], {}, broken_env)
    assert DINGTALK_TOKEN not in str(caught.value)


def test_url_fragments_cover_path_query_and_values():
    fragments = url_fragments(f"https://oapi.dingtalk.com/robot/send?access_token={DINGTALK_TOKEN}")
    assert DINGTALK_TOKEN in fragments and "/robot/send" not in fragments
    assert "xoxbSlackHookToken9f8e7d6c" in url_fragments("https://hooks.slack.com" + SLACK_PATH)


# --- configuration -------------------------------------------------------------------------------


def test_build_sinks_from_environment():
    env = {
        "GPUGOV_SLACK_WEBHOOK_URL": "https://hooks.slack.com" + SLACK_PATH,
        "GPUGOV_FEISHU_WEBHOOK_URL": "https://open.feishu.cn" + FEISHU_PATH,
    }
    sinks = build_sinks(["slack,feishu:text"], env, None)
    assert [(s.name, s.kind, s.format) for s in sinks] == [
        ("slack", "slack", "blocks"),
        ("feishu:text", "feishu", "text"),
    ]
    assert repr(sinks[1]) == "FeishuSink(name='feishu:text', format='text', signed=False)"


def test_build_sinks_from_env_style_file(tmp_path):
    path = tmp_path / "notify.conf"
    path.write_text(
        f"# chat hooks\nexport GPUGOV_DINGTALK_WEBHOOK_URL='https://oapi.dingtalk.com/robot/send?access_token={DINGTALK_TOKEN}'\nGPUGOV_DINGTALK_SECRET=\"{DINGTALK_SECRET}\"\n"
    )
    (built,) = build_sinks(["dingtalk"], {}, path)
    assert built.kind == "dingtalk" and repr(built).endswith("signed=True)")


def test_build_sinks_from_yaml_sections_wins_over_environment(tmp_path, receiver, transport):
    path = tmp_path / "notify.yaml"
    path.write_text(
        f"feishu:\n  webhook_url: {receiver.url(FEISHU_PATH)}\n  secret: {FEISHU_SECRET}\nGPUGOV_SLACK_WEBHOOK_URL: {receiver.url(SLACK_PATH)}\n"
    )
    env = {
        "GPUGOV_FEISHU_WEBHOOK_URL": "https://elsewhere.example/hook",
        "GPUGOV_SLACK_WEBHOOK_URL": "https://x.example/y",
    }
    feishu, slack = build_sinks(["feishu", "slack"], env, path, transport=transport)
    receiver.default = Answer(200, b'{"code":0}')
    feishu.send(Alert.of("t", FINDINGS, "fp"))
    slack.send(Alert.of("t", FINDINGS, "fp"))
    assert [s.path for s in receiver.seen] == [FEISHU_PATH, SLACK_PATH] and "sign" in receiver.seen[0].json


@pytest.mark.parametrize(
    ("specs", "env", "message"),
    [
        (["teams"], {}, "unknown sink 'teams'"),
        (["slack:card"], {}, "sink slack has no format 'card': choose blocks or text"),
        (["slack", "slack"], {"GPUGOV_SLACK_WEBHOOK_URL": "https://h/x"}, "sink slack is listed twice"),
        (["wecom"], {}, "sink wecom: set GPUGOV_WECOM_WEBHOOK_URL in the environment"),
        (["webhook"], {"GPUGOV_WEBHOOK_URL": "not a url"}, "GPUGOV_WEBHOOK_URL is not an http(s) URL"),
    ],
)
def test_build_sinks_errors(specs, env, message):
    with pytest.raises(NotifyConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_sinks(specs, env, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("teams:\n  url: https://x/y\n", "unknown section 'teams'"),
        ("slack:\n  token: abc\n", "unknown setting slack.token"),
        ("- a\n", "expected a mapping"),
    ],
)
def test_yaml_config_errors(tmp_path, text, message):
    path = tmp_path / "n.yaml"
    path.write_text(text)
    with pytest.raises(NotifyConfigError, match=message):
        build_sinks(["slack"], {}, path)


def test_missing_config_file(tmp_path):
    with pytest.raises(NotifyConfigError, match=r"cannot read .*nope\.yaml: No such file"):
        build_sinks(["slack"], {}, tmp_path / "nope.yaml")


def test_signing_helpers_match_documented_examples():
    # Independent recomputation with the documented recipes (Feishu: key=ts\nsecret over b""; DingTalk: key=secret).
    assert (
        feishu_sign("1599360473", "secret")
        == base64.b64encode(hmac.new(b"1599360473\nsecret", b"", hashlib.sha256).digest()).decode()
    )
    assert (
        dingtalk_sign("1599360473000", "secret")
        == base64.b64encode(hmac.new(b"secret", b"1599360473000\nsecret", hashlib.sha256).digest()).decode()
    )


# --- CLI -----------------------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpugov")
    notify_cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["notify", *argv])


@pytest.mark.parametrize(
    ("text", "days"), [("24h", 1), ("1d", 1), ("90m", 0.0625), ("1h30m", 0.0625), ("30s", 30 / 86400)]
)
def test_parse_duration(text, days):
    assert notify_cli.parse_duration(text) == timedelta(days=days)


@pytest.mark.parametrize("text", ["", "24", "h", "1w", "1h 2x"])
def test_parse_duration_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError):
        notify_cli.parse_duration(text)


def test_cli_sends_a_validate_report(receiver, transport, tmp_path, capsys):
    report = tmp_path / "report.json"
    report.write_text(as_json(FINDINGS, 7))
    state = tmp_path / "state.json"
    args = parse(str(report), "--notify", "slack,webhook", "--notify-state", str(state), "--title", "gpugov: main")
    assert notify_cli.cmd_notify(args, env_for(receiver), transport) == 0
    assert capsys.readouterr().err.splitlines() == ["gpugov notify: slack: sent", "gpugov notify: webhook: sent"]
    assert receiver.seen[1].json["findings"] == [f.to_dict() for f in Alert.of("t", FINDINGS, "").findings]
    assert notify_cli.cmd_notify(args, env_for(receiver), transport) == 0
    assert "slack: skipped (unchanged since" in capsys.readouterr().err


def test_cli_exit_codes_and_no_secrets_on_stderr(receiver, transport, tmp_path, capsys):
    report = tmp_path / "report.json"
    report.write_text(as_json(FINDINGS, 1))
    state = str(tmp_path / "state.json")
    receiver.default = Answer(404, f"no_service {SLACK_PATH}".encode())
    assert (
        notify_cli.cmd_notify(
            parse(str(report), "--notify", "slack", "--notify-state", state), env_for(receiver), transport
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "slack: failed (HTTP 404: no_service [redacted])" in err and SLACK_PATH not in err
    assert notify_cli.cmd_notify(parse(str(report), "--notify", "wecom", "--notify-state", state), {}, transport) == 2
    assert "set GPUGOV_WECOM_WEBHOOK_URL" in capsys.readouterr().err
    report.write_text('{"findings": [{"rule": "R"}]}')
    assert (
        notify_cli.cmd_notify(
            parse(str(report), "--notify", "slack", "--notify-state", state), env_for(receiver), transport
        )
        == 2
    )
    assert "rule, level and message" in capsys.readouterr().err


def test_notify_from_args_without_sinks_does_nothing(tmp_path):
    parser = argparse.ArgumentParser()
    notify_cli.add_arguments(parser)
    args = parser.parse_args([])
    assert args.notify_window == timedelta(hours=24)
    assert notify_cli.notify_from_args(args, FINDINGS, "t", {}) is None


def test_default_state_file():
    assert notify_cli.default_state_file({"GPUGOV_NOTIFY_STATE": "/x/s.json"}) == Path("/x/s.json")
    assert notify_cli.default_state_file({"XDG_STATE_HOME": "/st"}) == Path("/st/gpugov/notify-state.json")


def test_cli_without_requests_exits_2(tmp_path, monkeypatch, capsys):
    report = tmp_path / "report.json"
    report.write_text(as_json(FINDINGS, 1))
    monkeypatch.setitem(sys.modules, "requests", None)  # the notify extra is not installed
    env = {"GPUGOV_SLACK_WEBHOOK_URL": "https://hooks.slack.com" + SLACK_PATH}
    assert (
        notify_cli.cmd_notify(parse(str(report), "--notify", "slack", "--notify-state", str(tmp_path / "s")), env) == 2
    )
    assert "requests is not installed" in capsys.readouterr().err


def test_alert_orders_by_severity_and_counts_every_level():
    levels = list(Level)
    findings = [Finding(f"R{i}", level, "m", Location("a.yaml", i)) for i, level in enumerate(reversed(levels))]
    findings += [Finding("R9", levels[0], "m", Location("z.yaml"))]
    alert = Alert.of("t", findings, "fp")
    assert [f.level for f in alert.findings] == sorted((f.level for f in findings), key=levels.index)
    assert alert.summary.startswith("2 errors, 1 warning")
    assert sum(alert.counts.values()) == len(findings)


# --- drift that could not check still alerts ------------------------------------------------------


def drift_notifying(fake, tmp_path: Path, *extra: str) -> int:
    from gpugov.cli import main
    from tests.helpers.repos import REPO

    return main(["drift", str(REPO), "--cluster", "east", "--kubeconfig", str(fake.kubeconfig(tmp_path)),
                 "--format", "json", "--notify-state", str(tmp_path / "state.json"), *extra])


def test_drift_that_cannot_check_alerts_once_then_resolves(receiver, tmp_path, capsys, monkeypatch):
    """An unreachable or non-Kubernetes endpoint is exit 3 *and* an alert (GD000), deduplicated like
    any finding; when the cluster answers again the next alert carries the real findings."""
    from tests.helpers.fake_kube import HTML_PAGE, fake_kube

    monkeypatch.setenv("GPUGOV_WEBHOOK_URL", receiver.url(WEBHOOK_PATH))
    monkeypatch.delenv("GPUGOV_NOTIFY", raising=False)
    with fake_kube() as fake:
        fake.answer = lambda method, path: HTML_PAGE  # say, a proxy's login page
        assert drift_notifying(fake, tmp_path, "--notify", "webhook") == 3
        err = capsys.readouterr().err
        assert "gpugov notify: webhook: sent" in err
        (seen,) = receiver.seen
        (finding,) = seen.json["findings"]
        assert (finding["rule"], finding["level"], finding["object"]) == ("GD000", "error", "Cluster east")
        assert f"GET {fake.url}/apis/" in finding["message"] and "not JSON (text/html)" in finding["message"]
        assert drift_notifying(fake, tmp_path, "--notify", "webhook") == 3
        assert "webhook: skipped (unchanged since" in capsys.readouterr().err
        assert len(receiver.seen) == 1
        fake.answer = lambda method, path: None  # it answers as an (empty) API server again
        assert drift_notifying(fake, tmp_path, "--notify", "webhook") == 1
        capsys.readouterr()
    assert len(receiver.seen) == 2
    assert {f["rule"] for f in receiver.seen[1].json["findings"]} == {"GD001", "GD010"}


def test_the_sinks_can_come_from_gpugov_notify(receiver, tmp_path, capsys, monkeypatch):
    """The drift CronJob names its sinks in a Secret: $GPUGOV_NOTIFY stands for --notify."""
    from tests.helpers.fake_kube import EMPTY_OBJECT, fake_kube

    monkeypatch.setenv("GPUGOV_WEBHOOK_URL", receiver.url(WEBHOOK_PATH))
    monkeypatch.setenv("GPUGOV_NOTIFY", "webhook")
    with fake_kube() as fake:
        fake.answer = lambda method, path: EMPTY_OBJECT
        assert drift_notifying(fake, tmp_path) == 3
    assert "gpugov notify: webhook: sent" in capsys.readouterr().err
    assert receiver.seen[0].json["findings"][0]["rule"] == "GD000"
    monkeypatch.setenv("GPUGOV_NOTIFY", "pager")
    with fake_kube() as fake:
        assert drift_notifying(fake, tmp_path) == 2  # a bad sink name is bad usage, as with --notify
    assert "unknown sink 'pager'" in capsys.readouterr().err
