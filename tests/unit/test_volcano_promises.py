"""What Volcano cannot keep is said at the declaration (GG064), and the scheduler configuration keeps the
priority promise (gang's victim check off). The scheduler's side is proven in tests/e2e/test_volcano_contract.py."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpugov.app.pipeline import validate_repo
from gpugov.compile.volcano_scheduler import configuration_problems, plugin_names, scheduler_configuration
from tests.helpers.repos import EXAMPLES, REPO, overlay_repo, write

EDGE = EXAMPLES / "negative" / "GG064-volcano-strict-fifo"


def _gg064(root: Path) -> list[tuple[str, int, str]]:
    result = validate_repo(root)
    return [(f.location.file, f.location.line, f.message) for f in result.findings
            if f.rule == "GG064" and f.location is not None]


def test_strict_fifo_is_flagged_only_where_a_cluster_runs_volcano(tmp_path: Path) -> None:
    policy = "apiVersion: gpugov.io/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: default}\n" \
             "spec:\n  queueingStrategy: StrictFIFO\n"
    kueue_only = overlay_repo(tmp_path / "a")
    write(kueue_only, "policies/scheduling.yaml", policy)
    assert _gg064(kueue_only) == []
    mixed = overlay_repo(tmp_path / "b", EDGE)
    write(mixed, "policies/scheduling.yaml", policy)
    [(file, line, message)] = _gg064(mixed)
    assert (file, line) == ("policies/scheduling.yaml", 5) and "Volcano cluster(s) edge" in message
    write(mixed, "policies/scheduling.yaml", policy.replace("StrictFIFO", "BestEffortFIFO"))
    assert _gg064(mixed) == []


GAMMA = """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata:
  name: gamma
spec:
  owners: {users: [g@example.com]}
  costCenter: CC-7
  namespaces: [gamma]
  queues:
    - {name: main, namespace: gamma, priorityClasses: [batch]}
  quotas:
    - pool: edge-h100
      resources:
        accelerators: 8
  budget:
    acceleratorHours: 1000
    action: hold
"""


def test_a_budget_hold_is_kept_on_volcano_and_not_flagged(tmp_path: Path) -> None:
    """gpugov budget --apply closes a held tenant's Volcano Queue (tests/e2e/test_volcano_budget_reclaim.py):
    a hold budget of a tenant or a department on Volcano promises nothing Volcano cannot keep."""
    root = overlay_repo(tmp_path, EDGE)
    write(root, "policies/scheduling.yaml", "apiVersion: gpugov.io/v1alpha1\nkind: SchedulingPolicy\n"
          "metadata: {name: default}\nspec:\n  queueingStrategy: BestEffortFIFO\n")
    write(root, "tenants/gamma.yaml", GAMMA)
    assert _gg064(root) == []
    write(root, "tenants/gamma.yaml", GAMMA[:GAMMA.index("  budget:")].replace("  owners:", "  department: rnd\n  owners:"))
    departments = root / "tenants" / "departments.yaml"
    departments.write_text(departments.read_text().replace(
        "name: rnd\nspec: {}", "name: rnd\nspec:\n  budget: {acceleratorHours: 500, action: hold}", 1))
    assert "acceleratorHours: 500" in departments.read_text()
    result = validate_repo(root)
    assert result.model is not None and not result.errors, result.errors
    assert _gg064(root) == []


def test_gang_leaves_the_choice_of_victims_to_priority() -> None:
    """With gang's preemptable check on, every 1-pod job is refused as a victim and drf refuses the rest:
    higher priority work never preempts lower priority work of its queue (measured on the real scheduler)."""
    conf = scheduler_configuration("capacity")
    assert plugin_names(conf)["gang"].get("enablePreemptable") is False
    assert configuration_problems(__import__("yaml").safe_dump(conf), "capacity") == []


def test_within_cluster_queue_never_gives_every_volcano_class_preemption_policy_never(tmp_path: Path) -> None:
    from gpugov.compile import compile
    from tests.e2e.test_volcano_no_preemption import never_objects, never_repo

    _, objects = never_objects(never_repo(tmp_path))
    policies = {o["metadata"]["name"]: o["preemptionPolicy"] for o in objects if o["kind"] == "PriorityClass"}
    assert policies and set(policies.values()) == {"Never"}
    model = validate_repo(Path(__file__).resolve().parents[2]).model
    assert model is not None
    west = {o["preemptionPolicy"] for o in compile(model, cluster="west") if o["kind"] == "PriorityClass"}
    assert west == {"PreemptLowerPriority"}


BORROW = EXAMPLES / "negative" / "GG064-volcano-borrow-within-cohort"
WEIGHT = EXAMPLES / "negative" / "GG064-volcano-fair-sharing-weight"


def _policy(root: Path, *lines: str) -> None:
    write(root, "policies/scheduling.yaml", "apiVersion: gpugov.io/v1alpha1\nkind: SchedulingPolicy\n"
          "metadata: {name: default}\nspec:\n" + "".join(f"  {line}\n" for line in lines))


def test_borrowing_is_flagged_where_a_capacity_queue_can_go_above_its_deserved(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path, BORROW)
    [(file, line, message)] = _gg064(root)
    assert (file, line) == ("policies/scheduling.yaml", 8)
    assert "cluster 'edge'" in message and "(gamma)" in message  # delta's borrowingLimit is 0
    _policy(root, "preemption: {borrowWithinCohort: {policy: Never}}")
    assert _gg064(root) == []
    _policy(root, "volcano: {plugin: proportion}")  # reclaims up to capability: not this promise's breach
    assert _gg064(root) == []
    _policy(root, "volcano: {notKept: [borrowWithinCohort]}")
    assert _gg064(root) == []
    (root / "policies" / "scheduling.yaml").unlink()  # the default (LowerPriority): said at the cluster
    [(file, line, message)] = _gg064(root)
    assert (file, line) == ("policies/clusters.yaml", 11) and "borrowWithinCohort LowerPriority" in message


def test_a_lone_queue_or_one_that_cannot_borrow_is_not_flagged(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path, BORROW)
    tenants = root / "tenants" / "edge.yaml"
    text = tenants.read_text()
    tenants.write_text(text[:text.index("---")])  # gamma alone on edge: nobody to preempt
    assert _gg064(root) == []
    tenants.write_text(text.replace("{nominal: 4, borrowingLimit: 4}", "{nominal: 4, borrowingLimit: 0}"))
    assert _gg064(root) == []
    tenants.write_text(text.replace("  department: rnd\n", "", 1))  # no department: capability = deserved
    assert _gg064(root) == []


def test_a_weight_is_flagged_where_volcano_siblings_differ_by_it(tmp_path: Path) -> None:
    root = overlay_repo(tmp_path, WEIGHT)
    [(file, line, message)] = _gg064(root)
    assert (file, line) == ("tenants/edge.yaml", 12)
    assert "Tenant 'gamma'" in message and "capacity plugin reads no queue weight" in message
    tenants = root / "tenants" / "edge.yaml"
    text = tenants.read_text()
    tenants.write_text(text.replace("  costCenter: CC-8\n", "  costCenter: CC-8\n  fairSharing: {weight: 3}\n"))
    assert _gg064(root) == []  # equal weights decide nothing
    tenants.write_text(text)
    _policy(root, "volcano: {notKept: [fairSharing.weight]}")
    assert _gg064(root) == []
    _policy(root, "volcano: {plugin: proportion}")  # proportion reads a tenant queue's weight
    assert _gg064(root) == []
    departments = root / "tenants" / "departments.yaml"
    departments.write_text(departments.read_text().replace("name: rnd\nspec: {}", "name: rnd\nspec:\n"
                                                           "  fairSharing: {weight: 2}"))
    [(file, line, message)] = _gg064(root)  # but makes no queue for a department
    assert (file, line) == ("tenants/departments.yaml", 6) and "Department 'rnd'" in message


def test_the_example_org_says_what_west_does_not_keep(tmp_path: Path) -> None:
    """The example declares borrowing and product's weight 2 for east; without its notKept, west is flagged."""
    root = tmp_path / "org"
    for folder in ("hardware", "policies", "tenants"):
        shutil.copytree(REPO / folder, root / folder)
    policy = root / "policies" / "scheduling.yaml"
    text = policy.read_text()
    assert "notKept" in text
    policy.write_text(text[:text.index("    # west cannot keep")])
    found = {(file, message.split(":")[0]) for file, _, message in _gg064(root)}
    assert found == {
        ("policies/scheduling.yaml", "borrowWithinCohort LowerPriority is not kept on Volcano cluster 'west'"),
        ("tenants/departments.yaml", "fairSharing.weight 2 of Department 'product' is not kept on Volcano cluster(s) west"),
    }
