"""A new config repository (`gpugov init`): one cluster, one pool, one tenant, the CI workflows and
CODEOWNERS, written all at once and valid as written.

declarations.py holds the declaration files' text and the options (light: the CLI reads their
defaults when it builds its parser), workflows.py the GitHub Actions workflows (the gate and the
drift check, as in gpugov's own repository), create.py stages, validates and moves them into place.
Import from the modules: this package imports nothing, so that reading the options stays cheap.
"""
