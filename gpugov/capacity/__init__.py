"""Capacity planning: do the declared guarantees fit what exists and what is used?

report.py computes one cluster's report (pure) from compile's desired state, optionally the
live Nodes (gpugov.cluster.inventory reads them) and a usage ledger (ledger.py); markdown.py,
jsonout.py and html.py print it."""

from gpugov.capacity.ledger import Ledger, LedgerError, load_ledger
from gpugov.capacity.report import ClusterReport, cluster_report

__all__ = ["ClusterReport", "Ledger", "LedgerError", "cluster_report", "load_ledger"]
