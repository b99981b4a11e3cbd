"""Quota over time (issue #27): grants and windows, the model at an instant, the instant compiled
objects are for, validation from now on, and drift that never reports a scheduled change."""

from __future__ import annotations

import copy
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from gpugov.app.desired import desired_state
from gpugov.app.pipeline import validate_repo
from gpugov.cli import main
from gpugov.declarations.model import Model
from gpugov.declarations.timeline import model_at, segment, window_open
from gpugov.drift.live import LiveState
from gpugov.drift.objects import object_findings
from gpugov.kube.objects import ANNOTATION_DESIRED_AT, object_key
from tests.helpers.repos import EXAMPLES, overlay_repo

TIMELINE = EXAMPLES / "positive" / "quota-timeline"  # beta +8 1g.10gb on a100 in March 2030 (+08:00), a night window
BEFORE = datetime(2030, 2, 20, 4, tzinfo=UTC)  # Wednesday 12:00 in Shanghai, before the grant
DURING = datetime(2030, 3, 6, 4, tzinfo=UTC)  # Wednesday 12:00 in Shanghai: the grant holds, the window is closed
AFTER = datetime(2030, 3, 20, 4, tzinfo=UTC)  # Wednesday 12:00 in Shanghai, after the grant


def _repo(tmp_path: Path) -> Path:
    return overlay_repo(tmp_path, TIMELINE)


def _model(tmp_path: Path, now: datetime | None = None) -> Model:
    result = validate_repo(_repo(tmp_path), now=now)
    assert result.errors == [], result.findings
    assert result.model is not None
    return result.model


def _nominal(model: Model, holder: str, pool: str, key: str) -> Decimal:
    tenant = model.tenants[holder]
    return sum((rq.nominal for q in tenant.quotas if q.pool == pool for rq in q.resources if rq.key == key), Decimal(0))


def _cq_quota(objects: list[dict], queue: str, flavor_prefix: str, resource: str) -> str:
    for obj in objects:
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == queue:
            for group in obj["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    if flavor["name"].startswith(flavor_prefix):
                        for entry in flavor["resources"]:
                            if entry["name"] == resource:
                                return str(entry["nominalQuota"])
    raise AssertionError(f"no {resource} in {queue}")


def test_a_window_opens_on_its_weekdays_in_its_zone_and_closes_the_next_morning(tmp_path: Path) -> None:
    window = _model(tmp_path).windows["night"]  # Mon-Fri 20:00-08:00 Asia/Shanghai (UTC+8)
    friday_night = datetime(2030, 3, 8, 13, tzinfo=UTC)  # Fri 21:00 local
    saturday_morning = datetime(2030, 3, 8, 23, 30, tzinfo=UTC)  # Sat 07:30 local: Friday's window still open
    saturday_night = datetime(2030, 3, 9, 13, tzinfo=UTC)  # Sat 21:00 local: no window on Saturday
    assert window_open(window, friday_night)
    assert window_open(window, saturday_morning)
    assert not window_open(window, saturday_night)
    assert not window_open(window, datetime(2030, 3, 9, 0, tzinfo=UTC))  # Sat 08:00 local: closed (end exclusive)
    assert window_open(window, datetime(2030, 3, 4, 12, tzinfo=UTC))  # Mon 20:00 local: open (start inclusive)


def test_the_model_at_an_instant_adds_grants_and_moves_window_quota(tmp_path: Path) -> None:
    model = _model(tmp_path)
    during = model_at(model, DURING)
    assert _nominal(during, "beta", "a100", "1g.10gb") == 8  # beta holds no MIG quota of its own
    assert _nominal(model_at(model, AFTER), "beta", "a100", "1g.10gb") == 0
    night = model_at(model, datetime(2030, 3, 6, 14, tzinfo=UTC))  # Wed 22:00 local, grant in force too
    assert (_nominal(night, "alpha", "h100", "accelerators"), _nominal(night, "beta", "h100", "accelerators")) == (12, 4)
    # Pure: the declared model keeps its quotas.
    assert _nominal(model, "beta", "a100", "1g.10gb") == 0 and model.instant is None


def test_objects_say_which_span_they_are_for_and_an_instant_inside_it_compiles_the_same(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    during = desired_state(repo, at=DURING).objects
    later_same_span = desired_state(repo, at=datetime(2030, 3, 6, 6, tzinfo=UTC)).objects  # 14:00 local, same day
    assert during == later_same_span  # applying again inside a span changes nothing
    spans = {o["metadata"]["annotations"][ANNOTATION_DESIRED_AT] for o in during if o["kind"] != "Node"}
    assert spans == {"2030-03-06T00:00:00Z/2030-03-06T12:00:00Z"}  # Wed 08:00 .. 20:00 local
    assert _cq_quota(during, "beta", "a100", "nvidia.com/mig-1g.10gb") == "8"
    assert all(ANNOTATION_DESIRED_AT not in o["metadata"].get("annotations", {})
               for o in desired_state(overlay_repo(tmp_path / "plain"), at=DURING).objects)


def test_segment_is_bounded_by_the_next_boundary() -> None:
    assert segment(Model(), DURING) == (None, None)


def test_validate_warns_of_an_expired_grant_only_with_a_clock(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    late = validate_repo(repo, now=datetime(2031, 1, 1, tzinfo=UTC))
    assert [(f.rule, f.location.file) for f in late.findings] == [("GG173", "tenants/timeline.yaml")]
    assert validate_repo(repo, now=BEFORE).findings == []
    assert validate_repo(repo).findings == []


def test_an_overcommit_in_the_past_is_not_checked_from_now_on(tmp_path: Path) -> None:
    case = EXAMPLES / "negative" / "GG170-grant-overcommits"
    repo = overlay_repo(tmp_path, case)
    assert [f.rule for f in validate_repo(repo).findings] == ["GG170"]
    # After the overlap (from 2030-03-10 on) only the grant that still fits is ahead; the others ended.
    later = validate_repo(repo, now=datetime(2030, 3, 25, tzinfo=UTC))
    assert sorted(f.rule for f in later.findings) == ["GG173", "GG173"]


def _live(objects: list[dict]) -> LiveState:
    return LiveState(objects={object_key(o): copy.deepcopy(o) for o in objects if o["kind"] != "Node"})


def test_drift_compares_against_the_instant_it_runs_at(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    model = validate_repo(repo).model
    during = desired_state(repo, at=DURING).objects
    after = desired_state(repo, at=AFTER).objects
    # Inside the grant: what apply wrote then is clean, whatever span annotation it carries.
    assert object_findings(during, _live(during), model) == []
    # After the end, a cluster re-applied at the boundary is clean (the scheduled change is no drift)...
    assert object_findings(after, _live(after), model) == []
    # ...and one that still holds the grant's quota is drift, on beta's ClusterQueue only.
    stale = object_findings(after, _live(during), model)
    assert stale and {dict(f.details).get("object") for f in stale} == {"ClusterQueue beta"}, [str(f) for f in stale]


def test_cli_at_option_renders_for_that_instant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path)
    assert main(["render", str(repo), "--stdout", "--at", "2030-03-06T12:00:00+08:00"]) == 0
    out = capsys.readouterr().out
    assert "gpugov.io/desired-at: '2030-03-06T00:00:00Z/2030-03-06T12:00:00Z'" in out
    bad = subprocess.run([sys.executable, "-m", "gpugov", "render", str(repo), "--stdout", "--at", "yesterday"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "not an RFC 3339 instant" in bad.stderr and "Traceback" not in bad.stderr


def _with_operations(repo: Path) -> Path:
    clusters = repo / "policies" / "clusters.yaml"
    clusters.write_text(clusters.read_text() + "\n  operations: {image: registry.example/gpugov:1}\n")
    return repo


def test_the_timeline_cronjob_applies_the_quotas_of_its_instant_and_may_patch_only_those(tmp_path: Path) -> None:
    from gpugov.compile.operations import TIMELINE

    objects = desired_state(_with_operations(_repo(tmp_path)), at=DURING).objects
    cronjob = next(o for o in objects if o["kind"] == "CronJob" and o["metadata"]["name"] == TIMELINE)
    args = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["apply", "/config"] and "--only-quotas" in args and args[args.index("--at") + 1] == "now"
    role = next(o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == TIMELINE)
    writes = {(g, r) for rule in role["rules"] if rule["verbs"] == ["patch"] for g in rule["apiGroups"]
              for r in rule["resources"]}
    assert writes == {("", "resourcequotas"), ("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "cohorts"),
                      ("scheduling.volcano.sh", "queues")}
    assert all(set(rule["verbs"]) <= {"get", "list", "watch", "patch"} for rule in role["rules"])
    # Without a grant or window: no timeline CronJob.
    plain = desired_state(_with_operations(overlay_repo(tmp_path / "plain")), at=DURING).objects
    assert all(o["metadata"]["name"] != TIMELINE for o in plain)


def _pods(tenant_namespace: str, resource: str, amount: Decimal, started: datetime) -> list[dict]:
    """Running pods of one tenant that went through Kueue, `amount` of `resource` in all (one a device)."""
    return [{"metadata": {"name": f"p{i}", "namespace": tenant_namespace,
                          "labels": {"kueue.x-k8s.io/queue-name": "main"}},
             "spec": {"schedulerName": "default-scheduler",
                      "containers": [{"resources": {"limits": {resource: "1"}}}]},
             "status": {"phase": "Running", "startTime": started.isoformat().replace("+00:00", "Z")}}
            for i in range(int(amount))]


def test_pods_admitted_under_a_grant_that_ended_are_no_quota_breach(tmp_path: Path) -> None:
    """Kueue does not evict admitted workloads when quota drops: after a grant ends, the pods that
    started under it are GD026 (info), not GD020; pods that started after the end, or before the
    grant began, over the quota of their time are GD020."""
    from gpugov.compile.core import accelerator_ceiling
    from gpugov.drift.usage import usage_findings

    repo = _repo(tmp_path)
    after = desired_state(repo, at=AFTER)
    during = desired_state(repo, at=DURING)
    tenant = after.model.tenants["beta"]
    resource = next(r for r in accelerator_ceiling(during.scope, during.model.tenants["beta"]) if "1g.10gb" in r)
    held = accelerator_ceiling(during.scope, during.model.tenants["beta"])[resource]
    allowed = accelerator_ceiling(after.scope, tenant).get(resource, Decimal(0))
    assert held > allowed  # the grant raised what beta may hold
    namespace = tenant.namespaces[0]

    def rules(started: datetime) -> list[str]:
        live = LiveState(pods=_pods(namespace, resource, held, started))
        found = usage_findings(after.model, after.objects, live, after.scope.backend, after.scope.cluster.name)
        return sorted(f.rule for f in found if f.rule in ("GD020", "GD026"))

    assert rules(DURING) == ["GD026"]  # started under the grant
    assert rules(AFTER) == ["GD020"]  # started after it ended: a breach
    assert rules(BEFORE) == ["GD020"]  # as much held before the grant began: a breach then already
