"""Transparent queueing, pure: what Kueue's Workloads say, in the organisation's own terms.

workload.py reads one raw Workload (kueue.x-k8s.io/v1beta2) into a typed record; reasons.py
turns its QuotaReserved message into a reason with deficits; positions.py and estimate.py say
what is ahead of it and when it may start; report.py prints it. Nothing here talks to a cluster:
gpugov.cluster.queues reads, this package judges.
"""
