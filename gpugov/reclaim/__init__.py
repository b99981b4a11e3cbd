"""Reclaiming idle accelerators by declared policy (issue #26): the pure decision per Workload
(decide.py), the GD rules its warnings and actions are sent as (rules.py) and the report (report.py).
Reading the cluster and acting live in gpugov.cluster.reclaim; the command in gpugov.cli.reclaim."""
