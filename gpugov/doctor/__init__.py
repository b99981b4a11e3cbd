"""`gpugov doctor`: read-only checks that a cluster can really govern GPUs as declared.

facts.py is what is read (filled at the edge by gpugov.cluster.inventory), checks.py the
checks with stable ids (DR001...), report.py the formats and the exit code."""

from gpugov.doctor.checks import CHECKS, Result, Status, run_checks
from gpugov.doctor.facts import Facts, FactsRequest

__all__ = ["CHECKS", "Facts", "FactsRequest", "Result", "Status", "run_checks"]
