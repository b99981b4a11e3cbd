"""Job profiles (issue #41): what a job asked for against what it used, from DCGM over its admitted life,
with advice a user can act on, by the thresholds Guardrails.profile declares."""

from __future__ import annotations
