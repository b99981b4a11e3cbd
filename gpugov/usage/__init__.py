"""The usage and cost ledger, pure: who held which accelerators when, in exact Decimals.

window.py parses the window; segments.py turns Workloads into admitted intervals; idle.py
intersects them with DCGM utilisation; ledger.py sums them per tenant, cost centre and pool
and closes the ledger against capacity; formats.py and chart.py print it.
"""
