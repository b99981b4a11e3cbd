"""What-if: replay a job trace against two revisions' Kueue objects and compare waiting times.

- trace.py: the trace format (CSV or JSON lines), read and written;
- importers.py: public traces (Alibaba cluster-trace-gpu-v2023, SenseTime Helios) as traces;
- synthetic.py: a seeded trace drawn from a revision's queues, for when none is configured;
- setup.py: compile's Kueue objects as the simulator reads them;
- quota.py, flavors.py, preemption.py, state.py, simulate.py: Kueue v0.17's admission, replayed;
- timeline.py: where quotas change with time (QuotaGrant, QuotaWindow), the quotas at each boundary;
- replay.py: one revision compiled and replayed; report.py: two replays side by side
  (timeline_report.py: the boundaries each applied).

Pure: no cluster, no network. The exporter of a live cluster's finished Workloads is
gpugov.cluster.workloads.
"""
