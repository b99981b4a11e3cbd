"""Node agent: reads the GPUs through NVML and serves Prometheus metrics and a JSON snapshot.

nvidia-ml-py (module `pynvml`) and prometheus_client are optional: they are imported only when the agent
runs, so the rest of gpugov works without them.
"""
