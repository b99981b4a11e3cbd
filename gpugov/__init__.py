"""gpugov: GitOps governance for shared GPU clusters."""

__version__ = "0.1.0"
