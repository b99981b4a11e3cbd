"""A new config repository (`gpugov init`): one cluster, one pool, one tenant, the CI workflows and
CODEOWNERS, written all at once and valid as written.

declarations.py holds the declaration files' text, workflows.py the GitHub Actions workflows (the gate
and the drift check, as in gpugov's own repository), create.py stages, validates and moves them into
place.
"""

from gpugov.scaffold.create import ScaffoldError, create
from gpugov.scaffold.declarations import Options

__all__ = ["Options", "ScaffoldError", "create"]
