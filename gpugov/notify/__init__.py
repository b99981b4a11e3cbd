"""Alert sinks: findings to a JSON webhook, Slack, Feishu/Lark, DingTalk or WeCom, deduplicated.

    sinks = build_sinks(["slack", "dingtalk"], os.environ, config_file=None)
    result = notify(findings, sinks, state_file, window=timedelta(hours=24), title="gpugov drift: prod")

URLs and secrets come from GPUGOV_* variables or a --notify-config file and never appear in
messages, results, exceptions or logs.
"""

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
