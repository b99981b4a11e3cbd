"""Alert sinks: findings to a JSON webhook, Slack, Feishu/Lark, DingTalk or WeCom, deduplicated.

    sinks = build_sinks(["slack", "dingtalk"], os.environ, config_file=None)
    result = notify(findings, sinks, state_file, window=timedelta(hours=24), title="gpugov drift: prod")

URLs and secrets come from GPUGOV_* variables or a --notify-config file and never appear in
messages, results, exceptions or logs.

Names are imported lazily (PEP 562): gpugov's parser registers `gpugov notify` and the --notify
options of every command from gpugov.notify.cli, and must not pay for the sinks, HTTP and the
deduplication store to print --help.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpugov.app.exports import lazy_exports

if TYPE_CHECKING:
    from gpugov.notify.config import NotifyConfigError, build_sinks
    from gpugov.notify.dispatch import NotifyResult, SinkOutcome, notify
    from gpugov.notify.sinks import Sink
    from gpugov.notify.transport import RetryPolicy, SendError, Transport

__all__ = [
    "NotifyConfigError",
    "NotifyResult",
    "RetryPolicy",
    "SendError",
    "Sink",
    "SinkOutcome",
    "Transport",
    "build_sinks",
    "notify",
]
_HOMES = {
    "NotifyConfigError": "gpugov.notify.config",
    "build_sinks": "gpugov.notify.config",
    "NotifyResult": "gpugov.notify.dispatch",
    "SinkOutcome": "gpugov.notify.dispatch",
    "notify": "gpugov.notify.dispatch",
    "Sink": "gpugov.notify.sinks",
    "RetryPolicy": "gpugov.notify.transport",
    "SendError": "gpugov.notify.transport",
    "Transport": "gpugov.notify.transport",
}

__getattr__ = lazy_exports(__name__, _HOMES)
