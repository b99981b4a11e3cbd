"""Reclaiming idle accelerators by declared policy (issue #26): the pure decision per Workload
(decide.py), the GD rules its warnings and actions are sent as (rules.py), and from raw Workloads and
Pods to the decision's subjects and the actions' findings (subjects.py).
Reading the cluster and acting live in gpugov.cluster.reclaim; the command in gpugov.cli.reclaim."""
