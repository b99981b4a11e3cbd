"""The usage ledger's reclaimed section: Workloads `gpugov reclaim` deactivated, per tenant, and the
accelerator-hours they held idle from the warning to the deactivation (issue #26)."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from gpugov.capacity.ledger import parse_ledger
from gpugov.declarations.model import Model
from gpugov.kube.objects import ANNOTATION_RECLAIM_DEACTIVATED, ANNOTATION_RECLAIM_WARNED
from gpugov.queueing.workload import Workload, from_object
from gpugov.usage import formats
from gpugov.usage.ledger import ledger
from gpugov.usage.reclaimed import reclaimed
from gpugov.usage.segments import segments
from gpugov.usage.window import Window
from tests.unit.test_queueing_unit import raw_workload
from tests.unit.test_usage_unit import T0, model, tenant_of  # noqa: F401  (model: the ledger's fixture)

WINDOW = Window(T0, T0 + timedelta(hours=4))


def _at(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def deactivated(name: str, namespace: str, gpus: int, *, warned: int | None, at: int | None,
                resource: str = "nvidia.com/gpu") -> tuple[Workload, dict[str, str]]:
    """A Workload as it is after gpugov deactivated it: inactive, its admission cleared by Kueue,
    the warning and deactivation times (minutes after T0) in its annotations."""
    raw: dict[str, Any] = raw_workload(name, namespace, gpus=gpus, resource=resource, cluster_queue=namespace)
    raw["spec"]["active"] = False
    marks = {}
    if warned is not None:
        marks[ANNOTATION_RECLAIM_WARNED] = _at(warned)
    if at is not None:
        marks[ANNOTATION_RECLAIM_DEACTIVATED] = _at(at)
    return from_object(raw), marks


def by_namespace(w: Workload) -> str:
    return w.namespace


def test_reclaimed_counts_deactivations_in_the_window_and_the_idle_hours_before_them() -> None:
    result = reclaimed([
        deactivated("a", "alpha", 2, warned=60, at=120),  # 2 GPUs idle for 1 h: 2 GPU-hours
        deactivated("b", "alpha", 1, warned=-60, at=30),  # warned before the window: only the 30 min inside
        deactivated("c", "alpha", 8, warned=200, at=300),  # deactivated after the window: not this window's
        deactivated("d", "alpha", 8, warned=10, at=None),  # warned only: nothing reclaimed yet
        deactivated("e", "beta", 4, warned=100, at=90),  # reactivated and warned again: counted, no hours
        deactivated("f", "beta", 7, warned=0, at=45, resource="nvidia.com/mig-1g.10gb"),
    ], WINDOW, by_namespace)
    rows = {(r.tenant, r.resource): (r.deactivations, r.accelerator_seconds) for r in result.rows}
    assert rows == {
        ("alpha", "nvidia.com/gpu"): (2, Decimal(2 * 3600 + 1 * 1800)),
        ("beta", "nvidia.com/gpu"): (1, Decimal(0)),
        ("beta", "nvidia.com/mig-1g.10gb"): (1, Decimal(7 * 45 * 60)),
    }
    assert len(result.notes) == 1 and "beta/job-e-abcde" in result.notes[0] and "no warning" in result.notes[0]


def test_an_unreadable_deactivation_time_is_said_and_not_counted() -> None:
    workload, marks = deactivated("a", "alpha", 2, warned=0, at=None)
    marks[ANNOTATION_RECLAIM_DEACTIVATED] = "yesterday"
    result = reclaimed([(workload, marks)], WINDOW, by_namespace)
    assert result.rows == () and "not an RFC 3339 time" in result.notes[0]


def test_the_ledger_shows_reclaimed_hours_per_tenant_in_every_format(model: Model) -> None:  # noqa: F811
    taken = reclaimed([deactivated("a", "alpha", 2, warned=60, at=120),
                       deactivated("b", "alpha", 1, warned=0, at=30)], WINDOW, by_namespace)
    found, _ = segments([], WINDOW, WINDOW.until, tenant_of, lambda w, r: [])
    book = ledger(model, "default", WINDOW, found, reclaimed=taken.rows)
    data = json.loads(formats.json_text(book))
    assert data["reclaimed"] == [{"tenant": "alpha", "resource": "nvidia.com/gpu", "deactivations": 2,
                                  "hours": "2.5"}]
    assert parse_ledger(data, "ledger.json").cluster == "default"  # capacity still reads the shape
    rows = [r for r in csv.DictReader(io.StringIO(formats.csv_text(book))) if r["section"] == "reclaimed"]
    assert [(r["tenant"], r["resource"], r["hours"], r["deactivations"]) for r in rows] == [
        ("alpha", "nvidia.com/gpu", "2.5", "2")]
    table = formats.table(book)
    assert "reclaimed by gpugov reclaim" in table
    assert any(line.split() == ["alpha", "nvidia.com/gpu", "2", "2.50"] for line in table.splitlines())
    assert "| alpha | nvidia.com/gpu | 2 | 2.50 |" in formats.markdown(book)
    # Nothing deactivated: no section in the text, an empty list in the JSON.
    quiet = ledger(model, "default", WINDOW, found)
    assert "reclaimed by" not in formats.table(quiet) and json.loads(formats.json_text(quiet))["reclaimed"] == []


def test_a_reclaimed_row_is_exact_to_the_micro_hour() -> None:
    start = datetime(2026, 11, 1, 0, 0, 1, tzinfo=T0.tzinfo)
    window = Window(start, start + timedelta(hours=1))
    result = reclaimed([deactivated("a", "alpha", 3, warned=0, at=20)], window, by_namespace)
    assert result.rows[0].accelerator_seconds == Decimal(3 * (20 * 60 - 1))
