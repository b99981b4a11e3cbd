"""Notification options for commands that produce findings, and `gpugov notify REPORT`.

gpugov validate --format json > report.json
GPUGOV_SLACK_WEBHOOK_URL=... gpugov notify report.json --notify slack --title "gpugov: main"
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpugov.app.exit import ExitCode

# Import-light on purpose: every command's --notify options are registered from here before any
# command runs; the sinks, HTTP and the deduplication store are imported when a command sends.
if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import timedelta

    from gpugov.findings import Finding
    from gpugov.notify.dedup import StateStore
    from gpugov.notify.dispatch import NotifyResult
    from gpugov.notify.transport import Transport

CONFIGMAP_STATE = "configmap:"  # --notify-state configmap:NAMESPACE/NAME (drift: the CronJob keeps no files)
NOTIFY_ENV = "GPUGOV_NOTIFY"  # the sinks, where --notify is not given (the drift CronJob's Secret)
_DURATION = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(text: str) -> timedelta:
    """Parse "24h", "90m", "1h30m" or "7d"."""
    from datetime import timedelta

    compact = text.strip().lower()
    if not compact or _DURATION.sub("", compact):
        raise argparse.ArgumentTypeError(f"bad duration {text!r}: use e.g. 24h, 90m, 1h30m, 7d")
    return sum((timedelta(**{_UNITS[u]: int(n)}) for n, u in _DURATION.findall(compact)), timedelta())


def default_state_file(env: Mapping[str, str]) -> Path:
    if env.get("GPUGOV_NOTIFY_STATE"):
        return Path(env["GPUGOV_NOTIFY_STATE"])
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "gpugov" / "notify-state.json"


class _SinksAction(argparse._AppendAction):
    """--notify, whose help ends with the sinks and their formats: read from the sinks (HTTP,
    signing, messages) only when the help is printed, never to build the parser."""

    @property  # type: ignore[override]
    def help(self) -> str:
        from gpugov.notify.config import spec_help

        return f"send the findings to SINK (repeatable or comma-separated; default ${NOTIFY_ENV}); {spec_help()}"

    @help.setter
    def help(self, _text: str | None) -> None:
        pass  # argparse.Action sets help; the text is the property's


def add_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    group = parser.add_argument_group("notifications")
    group.add_argument("--notify", action=_SinksAction, metavar="SINK", required=required)
    group.add_argument(
        "--notify-config",
        type=Path,
        metavar="FILE",
        help="webhook URLs and secrets as NAME=VALUE lines or YAML (default: GPUGOV_* environment variables)",
    )
    group.add_argument(
        "--notify-state",
        metavar="FILE",
        help="what was last sent, for deduplication (default: $GPUGOV_NOTIFY_STATE or ~/.local/state/gpugov/); "
        "drift also takes configmap:NAMESPACE/NAME",
    )
    group.add_argument(
        "--notify-window",
        type=parse_duration,
        default="24h",  # argparse parses a string default with `type`: gpugov.notify.dispatch.DEFAULT_WINDOW
        metavar="DURATION",
        help="do not resend an unchanged set of findings within DURATION (default 24h)",
    )


def notify_from_args(
    args: argparse.Namespace,
    findings: list[Finding],
    title: str,
    env: Mapping[str, str] | None = None,
    *,
    transport: Transport | None = None,
    configmap: Callable[[str], StateStore] | None = None,
) -> NotifyResult | None:
    """Send when --notify (or $GPUGOV_NOTIFY, e.g. from a Kubernetes Secret) names sinks;
    raise NotifyConfigError for a bad spec or missing setting. `configmap` makes the state
    store for a `configmap:NAMESPACE/NAME` state."""
    env = os.environ if env is None else env
    specs = args.notify or ([env[NOTIFY_ENV]] if env.get(NOTIFY_ENV, "").strip() else [])
    if not specs:
        return None
    from gpugov.notify.config import build_sinks
    from gpugov.notify.dispatch import notify

    sinks = build_sinks(specs, env, args.notify_config, transport=transport)
    return notify(findings, sinks, state_store(args.notify_state, env, configmap), args.notify_window, title)


def state_store(spec: Path | str | None, env: Mapping[str, str],
                configmap: Callable[[str], StateStore] | None = None) -> Path | StateStore:
    """--notify-state (else $GPUGOV_NOTIFY_STATE, else the default file): a file, or with
    `configmap` (drift, which has a cluster) `configmap:NAMESPACE/NAME`."""
    text = str(spec) if spec is not None else env.get("GPUGOV_NOTIFY_STATE", "")
    if text.startswith(CONFIGMAP_STATE):
        from gpugov.notify.config import NotifyConfigError

        if configmap is None:
            raise NotifyConfigError(f"notify state {text}: only gpugov drift keeps it in a ConfigMap; use a file")
        return configmap(text.removeprefix(CONFIGMAP_STATE))
    return Path(text) if text else default_state_file(env)


def print_result(result: NotifyResult, stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    for o in result.outcomes:
        reason = f" ({o.reason})" if o.reason and o.status != "sent" else ""
        print(f"gpugov notify: {o.sink}: {o.status}{reason}", file=stream)
    if result.state_error:
        print(f"gpugov notify: warning: {result.state_error}", file=stream)


def load_findings(text: str) -> list[Finding]:
    """Findings from `gpugov validate --format json` (or a bare list of finding objects)."""
    import json

    from gpugov.findings import Finding, Level, Location

    data = json.loads(text)
    items = data.get("findings") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError("expected a JSON report with a findings list")
    findings = []
    for item in items:
        if not isinstance(item, dict) or not {"rule", "level", "message"} <= item.keys():
            raise ValueError("each finding needs rule, level and message")
        location = (
            Location(str(item["file"]), int(item.get("line", 0)), int(item.get("col", 0))) if item.get("file") else None
        )
        findings.append(
            Finding(str(item["rule"]), Level(item["level"]), str(item["message"]), location, str(item.get("hint", "")))
        )
    return findings


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "notify",
        help="send a JSON findings report to a webhook, Slack, Feishu, DingTalk or WeCom",
        description="Exit codes: 0 sent or skipped, 1 a sink failed, 2 usage or configuration error.",
    )
    p.add_argument("report", help="a `gpugov validate --format json` report, or - for standard input")
    p.add_argument("--title", default="gpugov", help="message title (default gpugov)")
    p.add_argument("--max-findings", type=int, metavar="N", help="list at most N findings (default 10; webhook 200)")
    add_arguments(p, required=True)
    p.set_defaults(func=cmd_notify)


def cmd_notify(
    args: argparse.Namespace, env: Mapping[str, str] | None = None, transport: Transport | None = None
) -> ExitCode:
    from gpugov.notify.config import NotifyConfigError, build_sinks
    from gpugov.notify.dispatch import notify

    try:
        text = sys.stdin.read() if args.report == "-" else Path(args.report).read_text(encoding="utf-8")
        findings = load_findings(text)
    except OSError as exc:
        return _fail(f"cannot read {args.report}: {exc.strerror or exc}")
    except ValueError as exc:
        return _fail(f"{args.report}: {exc}")
    env = os.environ if env is None else env
    try:
        sinks = build_sinks(args.notify, env, args.notify_config, transport=transport)
    except NotifyConfigError as exc:
        return _fail(str(exc))
    except ImportError:
        return _fail("requests is not installed (pip install 'gpugov[notify]')")
    try:
        state = state_store(args.notify_state, env)
    except NotifyConfigError as exc:
        return _fail(str(exc))
    result = notify(findings, sinks, state, args.notify_window, args.title, max_findings=args.max_findings)
    print_result(result)
    return ExitCode.OK if result.ok else ExitCode.FINDINGS


def _fail(message: str) -> ExitCode:
    print(f"gpugov notify: {message}", file=sys.stderr)
    return ExitCode.USAGE
