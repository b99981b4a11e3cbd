"""Issue #23 item 11: drift names an unset label as unset, and a changed quota at its quota line."""

from __future__ import annotations

from gpugov.drift import check
from gpugov.kube.objects import object_key
from tests.helpers.repos import REPO
from tests.unit.test_drift_unit import in_sync, org  # noqa: F401  (the module's fixture)


def test_an_unset_node_label_reads_not_set(org) -> None:  # noqa: F811
    model, objects = org
    live = in_sync(model, objects)
    del live.nodes["h100-02"]["metadata"]["labels"]["gpugov.io/pool"]
    (finding,) = [f for f in check(model, objects, live, "kueue", "east") if f.rule == "GD012"]
    assert finding.message == "node h100-02: label gpugov.io/pool is not set, declared 'h100'"


def test_a_changed_quota_is_reported_at_its_quota_line(org) -> None:  # noqa: F811
    model, objects = org
    live = in_sync(model, objects)
    queue = next(o for o in objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "nlp")
    changed = live.objects[object_key(queue)]
    (h100,) = [f for g in changed["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == "h100"]
    (gpu,) = [r for r in h100["resources"] if r["name"] == "nvidia.com/gpu"]
    gpu["nominalQuota"] = "12"
    (finding,) = [f for f in check(model, objects, live, "kueue", "east") if f.rule == "GD002"]
    lines = (REPO / "tenants" / "nlp.yaml").read_text().splitlines()
    line = next(i for i, t in enumerate(lines, start=1) if "accelerators: {nominal: 16" in t)
    assert (finding.location.file, finding.location.line) == ("tenants/nlp.yaml", line), finding
    assert finding.message.startswith("ClusterQueue nlp: spec.resourceGroups.0.flavors.h100.resources.nvidia.com/gpu"
                                      ".nominalQuota is 12, declared 16")
    lend = next(r for r in h100["resources"] if r["name"] == "nvidia.com/gpu")
    gpu["nominalQuota"] = "16"
    lend["lendingLimit"] = "4"
    (finding,) = [f for f in check(model, objects, live, "kueue", "east") if f.rule == "GD002"]
    assert finding.location.line == line and finding.location.col > 0  # the lendingLimit of that line
