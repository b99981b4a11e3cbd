"""gpugov/compile/admission/: one module a policy, each with its threat-model row beside it (attack,
control, test in its docstring), every test it names a file of the repository, every policy it emits
named in the README's threat model or contract."""

from __future__ import annotations

import importlib
import pkgutil
import re

import gpugov.compile.admission as package
from tests.helpers.repos import REPO

MODULES = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name != "common")


def test_every_policy_module_carries_its_threat_model_row() -> None:
    assert len(MODULES) >= 12
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name in MODULES:
        module = importlib.import_module(f"{package.__name__}.{name}")
        doc = module.__doc__ or ""
        assert "Threat model: attack:" in doc and "control:" in doc and "test:" in doc, name
        for path in re.findall(r"tests/[\w/]+\.py", doc):
            assert (REPO / path).is_file(), (name, path)
        policies = [v for k, v in vars(module).items() if k.isupper() and isinstance(v, str) and v.startswith("gpugov-")]
        assert policies, name
        for policy in policies:
            assert f"`{policy}" in readme, (name, policy)
