"""What Volcano cannot keep is said at the declaration (GG064), and the scheduler configuration keeps the
priority promise (gang's victim check off). The scheduler's side is proven in tests/e2e/test_volcano_contract.py."""

from __future__ import annotations

from pathlib import Path

from gpugov.app.pipeline import validate_repo
from gpugov.compile.volcano_scheduler import configuration_problems, plugin_names, scheduler_configuration
from tests.helpers.repos import EXAMPLES, overlay_repo, write

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
