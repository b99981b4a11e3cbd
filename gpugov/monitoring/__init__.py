"""Compiled monitoring (issue #41): recording rules and Grafana dashboards from the declarations, in step
with the usage ledger's attribution."""

from __future__ import annotations
