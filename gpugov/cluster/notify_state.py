"""The alert state of the drift CronJob, kept in a ConfigMap: its pods keep no files between runs,
so a state file would be empty every time and each run would alert again.

compile emits the ConfigMap (empty) and lets the drift ServiceAccount get and patch that one
ConfigMap only; drift writes its `data` by server-side apply under its own field manager, so
`gpugov apply` (which sets no data) never takes it back, and prune keeps it (it is declared).
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client

from gpugov.cluster.rest import Api, Rejected, read_object, server_side_apply
from gpugov.kube.kinds import KINDS
from gpugov.notify.dedup import Sent, state_from_text, state_to_text
from gpugov.sources import CheckIncomplete

log = logging.getLogger("gpugov.notify")
CONFIG_MAP = KINDS[("v1", "ConfigMap")]
KEY = "notify-state.json"
FIELD_MANAGER = "gpugov-drift"


class ConfigMapState:
    def __init__(self, api_client: client.ApiClient, namespace: str, name: str) -> None:
        self.api = Api(api_client)
        self.namespace, self.name = namespace, name

    @classmethod
    def parse(cls, api_client: client.ApiClient, where: str) -> ConfigMapState:
        """From "NAMESPACE/NAME" (what follows `configmap:` in --notify-state); ValueError otherwise."""
        namespace, _, name = where.partition("/")
        if not namespace or not name or "/" in name:
            raise ValueError(f"notify state configmap:{where}: expected configmap:NAMESPACE/NAME")
        return cls(api_client, namespace, name)

    def __str__(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    def load(self) -> dict[str, Sent]:
        try:
            live = read_object(self.api, CONFIG_MAP, self.name, self.namespace)
            text = ((live or {}).get("data") or {}).get(KEY)
            return state_from_text(text) if text else {}
        except (CheckIncomplete, ValueError, KeyError, TypeError, AttributeError) as exc:
            # As with a bad state file: a repeated alert is better than none.
            log.warning("ignoring notification state %s (%s)", self, type(exc).__name__)
            return {}

    def save(self, state: dict[str, Sent]) -> None:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": self.name, "namespace": self.namespace},
                                "data": {KEY: state_to_text(state)}}
        try:
            server_side_apply(self.api, CONFIG_MAP, body, field_manager=FIELD_MANAGER)
        except (Rejected, CheckIncomplete) as exc:
            raise OSError(" ".join(str(exc).split())) from exc
