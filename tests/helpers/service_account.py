"""A kubeconfig that acts as a ServiceAccount, with a token the API server issues for it: how the e2e
suite runs gpugov's in-cluster commands with exactly the RBAC compile gives their CronJobs."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client

from gpugov.sandbox.cluster import Sandbox


def service_account_kubeconfig(sandbox: Sandbox, namespace: str, name: str, path: Path) -> Path:
    token = client.CoreV1Api(sandbox.cp.api_client()).create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    admin = yaml.safe_load(sandbox.cp.kubeconfig.read_text())
    path.write_text(yaml.safe_dump({
        **admin, "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": admin["clusters"][0]["name"], "user": name}}],
        "current-context": name}))
    return path
