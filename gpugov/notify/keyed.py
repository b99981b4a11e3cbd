"""One deduplication entry per alert key inside a shared state store.

`notify` keeps, per sink, the fingerprint of the last set of findings it sent. An alert that must
go out once per key (a budget threshold: once per holder, period and threshold) is sent as its own
one-finding set whose state lives under `KEY|sink`, beside the other entries of the same store
(a file, or drift's ConfigMap), which are kept as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpugov.notify.dedup import Sent, StateStore

SEPARATOR = "|"


@dataclass(frozen=True)
class KeyedState:
    store: StateStore
    key: str

    def load(self) -> dict[str, Sent]:
        prefix = self.key + SEPARATOR
        return {name.removeprefix(prefix): sent for name, sent in self.store.load().items() if name.startswith(prefix)}

    def save(self, state: dict[str, Sent]) -> None:
        everything = self.store.load()
        everything.update({f"{self.key}{SEPARATOR}{sink}": sent for sink, sent in state.items()})
        self.store.save(everything)

    def __str__(self) -> str:
        return f"{self.store} ({self.key})"
