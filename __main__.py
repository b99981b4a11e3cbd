"""Pulumi entry point (Pulumi.yaml): deploy this stack's cluster from the declarations here."""

from gpugov.deploy import run

run()
