"""Budgets in money (issue #27): `cost` instead of `acceleratorHours` spends the usage ledger's cost of the
same rows, in the currency of the holder's pools; pools of different currencies are refused at the budget."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.declarations.model import Budget, Model
from gpugov.plan.directions import DIRECTIONS
from gpugov.plan.risks import QUOTA_RAISED
from gpugov.plan.widening import widened
from gpugov.policy.budget import MIXED_CURRENCIES, UNPRICED_POOL
from gpugov.queueing.workload import from_object
from gpugov.usage import formats
from gpugov.usage.attribution import attribution
from gpugov.usage.budget import (
    BUDGET_ALERT,
    BUDGET_SPENT,
    alerts,
    budget_statuses,
    held_tenants,
    period_of,
    period_rows,
)
from gpugov.usage.ledger import ledger
from gpugov.usage.segments import segments
from gpugov.usage.window import Window
from tests.unit.test_budget import LAB, run_budget, workload
from tests.unit.test_usage_unit import ORG

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
POOLS = (ORG["hardware/pools.yaml"].replace('pricePerAcceleratorHour: "2.00"\n', 'pricePerAcceleratorHour: "2.00"\n'
                                             "  currency: USD\n")
         .replace('pricePerAcceleratorHour: "1.40"\n', 'pricePerAcceleratorHour: "1.40"\n  currency: USD\n'))
# alpha (pool whole, 2 USD an hour) holds, the department (alpha, and beta on whole and sliced) alerts at 10 and 50%
COSTED = (LAB.replace("spec: {costCenter: CC-LAB}",
                      "spec:\n  costCenter: CC-LAB\n  budget: {cost: 100, alerts: [10, 50]}")
          .replace("  quotas: [{pool: whole, resources: {accelerators: 4}}]\n",
                   "  quotas: [{pool: whole, resources: {accelerators: 4}}]\n"
                   "  budget: {cost: 30, action: hold}\n", 1))


def validated(tmp_path: Path, lab: str = COSTED, pools: str = POOLS) -> tuple[Path, list, Model | None]:
    for rel, text in {**ORG, "hardware/pools.yaml": pools, "tenants/lab.yaml": lab}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    result = validate_repo(tmp_path)
    return tmp_path, result.findings, result.model


def build(tmp_path: Path) -> Model:
    _, findings, model = validated(tmp_path)
    assert model is not None and findings == [], findings
    return model


def statuses_after(model: Model, hours: int) -> dict[str, object]:
    raws = [workload("a", "alpha", NOW - timedelta(hours=hours), 4),  # 4 GPUs of whole: 8 USD an hour
            workload("b", "beta", NOW - timedelta(hours=3), 7, resource="nvidia.com/mig-1g.10gb", flavor="sliced")]
    rows = period_rows(model, "default", [from_object(r) for r in raws], attribution(model, "default", []), NOW)
    return {s.holder.name: s for s in budget_statuses(model, rows, NOW)}


def test_a_cost_budget_is_declared_in_money(tmp_path: Path) -> None:
    model = build(tmp_path)
    assert model.tenants["alpha"].budget == Budget(None, "month", (80, 100), "hold", Decimal(30))
    assert model.departments["lab"].budget == Budget(None, "month", (10, 50), "none", Decimal(100))


def test_a_cost_budget_crosses_80_then_100_percent_and_holds(tmp_path: Path) -> None:
    model = build(tmp_path)
    three = statuses_after(model, 3)  # alpha: 12 device-hours x 2 USD = 24 USD, 80% of 30
    alpha, lab = three["alpha"], three["lab"]
    assert (alpha.spent, alpha.unit, alpha.percent, alpha.crossed, alpha.hold) == (
        Decimal(24), "USD", Decimal("80.0"), (80,), False)
    # the department: alpha's 24 and beta's 21 slice-hours of an A100 at 1.40 / 7 a slice: 4.2 USD
    assert (lab.spent, lab.unit, lab.crossed) == (Decimal("28.2"), "USD", (10,))
    found = alerts(model, three.values())
    assert [(a.key, a.finding.rule) for a in found] == [("Tenant/alpha/2026-12/80", BUDGET_ALERT.id),
                                                       ("Department/lab/2026-12/10", BUDGET_ALERT.id)]
    assert found[0].finding.message == "tenant 'alpha' reached 80% of its cost budget for 2026-12 (30 USD a month)"
    assert held_tenants(three.values()) == frozenset()

    four = statuses_after(model, 4)  # 32 USD: spent
    assert (four["alpha"].spent, four["alpha"].crossed, four["alpha"].hold) == (Decimal(32), (80, 100), True)
    assert held_tenants(four.values()) == {"alpha"}
    spent = [a for a in alerts(model, four.values()) if a.finding.rule == BUDGET_SPENT.id]
    assert [a.key for a in spent] == ["Tenant/alpha/2026-12/100"]
    # spent is the ledger's own cost of the period's rows
    window = Window(period_of("month", NOW).since, NOW)
    raws = [from_object(workload("a", "alpha", NOW - timedelta(hours=4), 4))]
    rules = attribution(model, "default", [])
    found_segments, _ = segments(raws, window, NOW, rules.tenant_of, rules.offers)
    book = ledger(model, "default", window, found_segments)
    assert sum((r.cost or Decimal(0) for r in book.rows if r.tenant == "alpha"), Decimal(0)) == Decimal(32)


def test_usage_shows_a_cost_budget_in_its_currency(tmp_path: Path) -> None:
    model = build(tmp_path)
    window = Window(NOW - timedelta(hours=1), NOW)
    book = replace(ledger(model, "default", window, []),
                   budgets=tuple(s.line() for s in statuses_after(model, 3).values()))
    data = json.loads(formats.json_text(book))
    assert data["budgets"][0] == {"holder": "tenant 'alpha'", "period": "2026-12", "since": "2026-12-01T00:00:00Z",
                                  "spent_cost": "24", "budget_cost": "30", "currency": "USD", "percent": "80",
                                  "action": "hold", "held": False}
    assert any(line.split()[:7] == ["tenant", "'alpha'", "2026-12", "2026-12-01T00:00:00Z", "24", "30", "USD"]
               for line in formats.table(book).splitlines())


@pytest.mark.parametrize("budget", ["{acceleratorHours: 10, cost: 5}", "{action: hold}"])
def test_exactly_one_of_hours_and_cost(tmp_path: Path, budget: str) -> None:
    lab = COSTED.replace("{cost: 30, action: hold}", budget)
    _, findings, model = validated(tmp_path, lab)
    assert model is None
    (error,) = [f for f in findings if f.rule == "GG003"]
    assert error.message == "spec.budget: give exactly one of acceleratorHours or cost"
    assert error.location is not None and error.location.line == lab.splitlines().index(f"  budget: {budget}") + 1


def test_pools_of_different_currencies_are_refused_at_the_budget(tmp_path: Path) -> None:
    pools = POOLS.replace('"1.40"\n  currency: USD', '"1.40"\n  currency: EUR')
    _, findings, _ = validated(tmp_path, pools=pools)
    (error,) = findings  # the department (beta prices in both); alpha, on whole only, spends in USD
    assert (error.rule, error.level.value) == (MIXED_CURRENCIES.id, "error")
    assert error.message == ("the cost budget of department 'lab' covers pools priced in different currencies: "
                             "EUR (sliced), USD (whole)")
    assert error.location is not None and error.location.file == "tenants/lab.yaml"
    assert error.location.line == COSTED.splitlines().index("  budget: {cost: 100, alerts: [10, 50]}") + 1
    # an hours budget over the same pools is fine
    _, findings, _ = validated(tmp_path / "hours", lab=COSTED.replace("cost: 100", "acceleratorHours: 100"),
                               pools=pools)
    assert findings == []


def test_a_pool_without_a_price_is_a_warning(tmp_path: Path) -> None:
    pools = POOLS.replace('  pricePerAcceleratorHour: "1.40"\n  currency: USD\n', "")
    _, findings, model = validated(tmp_path, pools=pools)
    assert [(f.rule, f.level.value) for f in findings] == [(UNPRICED_POOL.id, "warning")]
    assert "sliced" in findings[0].message and model is not None


def test_raising_a_cost_budget_is_a_plan_risk_like_hours() -> None:
    for kind in ("Tenant", "Department"):
        for name in ("spec.budget.cost", "spec.budget.acceleratorHours"):
            field = DIRECTIONS[kind][name]
            assert field.rule is QUOTA_RAISED and field.when is not None
            assert widened(field.when, 30, 40) and widened(field.when, 30, None)  # raised, or no limit any more
            assert not widened(field.when, 40, 30) and not widened(field.when, None, 30)  # lowered, or a new limit


def test_budget_command_holds_on_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, _, model = validated(tmp_path / "repo", COSTED.replace("cost: 30,", "cost: 1,"))
    assert model is not None
    now = datetime.now(UTC)
    start = max(now - timedelta(hours=2), period_of("month", now).since)
    queues = {"alpha": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                        "metadata": {"name": "alpha", "managedFields": []}, "spec": {"stopPolicy": "None"}},
              "beta": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                       "metadata": {"name": "beta", "managedFields": []}, "spec": {"stopPolicy": "None"}}}
    code, writes = run_budget(tmp_path, repo, [workload("big", "alpha", start, 8)], queues, "--apply",
                              "--format", "json", "--notify-state", str(tmp_path / "state.json"))
    out = capsys.readouterr().out
    alpha = next(b for b in json.loads(out)["budgets"] if b["holder"] == "alpha")
    assert code == 1 and writes == [("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/alpha")]
    assert alpha["currency"] == "USD" and alpha["budget_cost"] == "1" and alpha["held"] is True
    assert "spent_hours" not in alpha and Decimal(alpha["spent_cost"]) > 1
    code, _ = run_budget(tmp_path, repo, [workload("big", "alpha", start, 8)], queues)
    assert "of 1 USD in" in capsys.readouterr().out
