"""notify(): send the findings to each sink unless that sink already has this exact set, recently."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpugov.findings import Finding
from gpugov.notify.dedup import EMPTY, FileState, Sent, StateStore, fingerprint
from gpugov.notify.message import Alert
from gpugov.notify.sinks import Sink
from gpugov.notify.transport import SendError

log = logging.getLogger("gpugov.notify")
DEFAULT_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class SinkOutcome:
    sink: str  # the sink's name ("slack", "feishu:text"), never its URL
    status: str  # "sent", "skipped" or "failed"
    reason: str = ""
    attempts: int = 0


@dataclass(frozen=True)
class NotifyResult:
    fingerprint: str
    outcomes: tuple[SinkOutcome, ...] = field(default_factory=tuple)
    state_error: str | None = None  # the state file could not be written: expect a repeat next time

    def _names(self, status: str) -> list[str]:
        return [o.sink for o in self.outcomes if o.status == status]

    @property
    def sent(self) -> list[str]:
        return self._names("sent")

    @property
    def skipped(self) -> list[str]:
        return self._names("skipped")

    @property
    def failed(self) -> list[str]:
        return self._names("failed")

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict:
        return {
            "fingerprint": self.fingerprint,
            "outcomes": [asdict(o) for o in self.outcomes],
            "state_error": self.state_error,
        }


def notify(
    findings: list[Finding],
    sinks: list[Sink],
    state_file: Path | StateStore,
    window: timedelta = DEFAULT_WINDOW,
    title: str = "gpugov",
    *,
    max_findings: int | None = None,
    clock: Callable[[], datetime] | None = None,
) -> NotifyResult:
    """Send to each sink whose last delivery differs from these findings or is older than `window`.

    An empty set is sent once as "resolved" to a sink that last got findings, and never otherwise.
    A failed sink keeps its old state, so the next run tries again.
    """
    now = (clock or (lambda: datetime.now(UTC)))()
    fp = fingerprint(findings)
    store = FileState(state_file) if isinstance(state_file, Path) else state_file
    state = store.load()
    alert = Alert.of(title, findings, fp)
    outcomes = []
    changed = False
    for sink in sinks:
        last = state.get(sink.name)
        if not findings and (last is None or last.fingerprint == EMPTY):
            outcomes.append(SinkOutcome(sink.name, "skipped", "no findings"))
            continue
        if last is not None and last.fingerprint == fp and now - last.at < window:
            outcomes.append(
                SinkOutcome(sink.name, "skipped", f"unchanged since {last.at.astimezone(UTC):%Y-%m-%d %H:%M} UTC")
            )
            continue
        try:
            attempts = sink.send(alert, max_findings)
        except SendError as exc:
            outcomes.append(SinkOutcome(sink.name, "failed", str(exc), exc.attempts))
            log.warning("notify %s failed: %s", sink.name, exc)
            continue
        except Exception as exc:  # a bug must not stop the other sinks; its text may hold a URL
            outcomes.append(SinkOutcome(sink.name, "failed", f"internal error ({type(exc).__name__})"))
            log.warning("notify %s failed: internal error (%s)", sink.name, type(exc).__name__)
            continue
        state[sink.name] = Sent(fp, now, len(findings))
        changed = True
        outcomes.append(SinkOutcome(sink.name, "sent", alert.status, attempts))
        log.info("notify %s: sent %s", sink.name, alert.summary)
    state_error = None
    if changed:
        try:
            store.save(state)
        except OSError as exc:
            state_error = f"cannot write {store}: {exc.strerror or str(exc) or type(exc).__name__}"
            log.warning("notify: %s", state_error)
    return NotifyResult(fp, tuple(outcomes), state_error)
