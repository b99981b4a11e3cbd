"""Readers at the edge: the live cluster's API (gpugov.cluster), git revisions, Prometheus and
the node agents. Each read is whole or it raises CheckIncomplete: a partial read never
reports "no drift" and never becomes a ledger presented as whole."""

from __future__ import annotations


class CheckIncomplete(Exception):
    """A source could not be read completely; the command exits 3 (could not check)."""
