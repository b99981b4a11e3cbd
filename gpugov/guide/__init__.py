"""The tenant guide (`gpugov guide TENANT`): what a tenant's users need to submit work, generated from the
declarations in English or Simplified Chinese. facts.py reads compile's objects, render.py writes markdown."""

from __future__ import annotations

from pathlib import Path

from gpugov.app.revision import valid_revision
from gpugov.guide.facts import GuideError, PoolInfo, TenantFacts, sample_job, tenant_facts
from gpugov.guide.render import LANGUAGES, render


def tenant_guide(root: Path, tenant: str, lang: str = "en") -> str:
    """The guide of `tenant` in the working tree at `root`: InputError, InvalidDeclarations or GuideError."""
    revision = valid_revision(root)
    assert revision.model is not None  # valid_revision refuses a revision without one
    return render(tenant_facts(revision.model, revision.compiled, tenant), lang)


__all__ = ["LANGUAGES", "GuideError", "PoolInfo", "TenantFacts", "render", "sample_job", "tenant_facts", "tenant_guide"]
