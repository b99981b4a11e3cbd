"""Usage for people (issue #23 item 10): table and markdown round hours and costs to two decimals and
name the currency each pool's price declares (spec.currency), never adding two currencies; csv and
json keep the exact numbers."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.declarations.model import Model
from gpugov.usage import formats
from gpugov.usage.ledger import Ledger, ledger
from gpugov.usage.segments import segments
from gpugov.usage.window import Window
from tests.helpers.repos import FIXTURES
from tests.unit.test_usage_unit import ORG, T0, admitted, tenant_of


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> Model:
    """The usage org with its H100 pool priced in USD and its MIG pool in CNY."""
    root = tmp_path_factory.mktemp("priced-org")
    pools = ORG["hardware/pools.yaml"].replace('pricePerAcceleratorHour: "2.00"\n',
                                               'pricePerAcceleratorHour: "2.00"\n  currency: USD\n')
    pools = pools.replace('pricePerAcceleratorHour: "1.40"\n', 'pricePerAcceleratorHour: "1.40"\n  currency: CNY\n')
    for rel, text in {**ORG, "hardware/pools.yaml": pools}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    result = validate_repo(root)
    assert result.model is not None and not result.errors, result.errors
    return result.model


def book_of(model: Model) -> Ledger:
    window = Window(T0, T0 + timedelta(hours=1))
    workloads = [admitted("a1", "alpha", 0, 1234, 3),
                 admitted("b1", "beta", 0, 1000, 1),
                 admitted("b2", "beta", 0, 777, 2, resource="nvidia.com/mig-1g.10gb", flavor="sliced")]
    found, _ = segments(workloads, window, window.until, tenant_of, lambda w, r: [])
    return ledger(model, "default", window, found)


def test_table_rounds_for_people_and_names_the_currency(priced: Model) -> None:
    book = book_of(priced)
    alpha = next(r for r in book.rows if r.tenant == "alpha")
    assert (alpha.admitted_hours, alpha.cost) == (Decimal("1.028333"), Decimal("2.056666"))  # exact in the ledger
    lines = formats.table(book).splitlines()
    row = next(line for line in lines if line.startswith("alpha "))
    assert row.split()[6:] == ["1.03", "1.03", "0.00", "0.00", "2", "USD", "2.06", "USD"]
    mig = next(line for line in lines if line.startswith("beta ") and "sliced" in line)
    assert mig.split()[-4:] == ["0.2", "CNY", "0.09", "CNY"]  # 2 slices x 777 s = 0.431667 h x 0.2
    beta_total = next(line for line in lines[lines.index("per tenant:"):] if line.startswith("beta "))
    assert beta_total.split(None, 2)[2] == "0.09 CNY, 0.56 USD"  # two currencies are never added
    closing = lines[-1]
    assert closing.startswith("ledger closes: tenants' charges 0.09 CNY + unallocated ")
    # one equation per currency, every figure with its unit: two currencies are never on one side of a sum
    equations = closing.removeprefix("ledger closes: ").split("; ")
    assert [set(re.findall(r"\d (CNY|USD)", e)) for e in equations] == [{"CNY"}, {"USD"}]
    assert all(len(re.findall(r"\d (?:CNY|USD)", e)) == 3 for e in equations)  # charges + unallocated = capacity
    assert "15.82555" not in formats.table(book) and "2.056666" not in formats.table(book)


def test_markdown_rounds_too(priced: Model) -> None:
    text = formats.markdown(book_of(priced))
    assert "| alpha | lab | CC-LAB | whole | nvidia.com/gpu | accelerator-hours | 1.03 | 1.03 | 0.00 | 0.00 | 2 USD | " \
           "2.06 USD |" in text


def test_json_and_csv_keep_exact_values_and_the_currency(priced: Model) -> None:
    book = book_of(priced)
    data = json.loads(formats.json_text(book))
    alpha = next(r for r in data["rows"] if r["tenant"] == "alpha")
    assert (alpha["admitted_hours"], alpha["cost"], alpha["currency"]) == ("1.028333", "2.056666", "USD")
    assert {c["pool"]: c["currency"] for c in data["capacity"]} == {"sliced": "CNY", "whole": "USD"}
    rows = list(csv.DictReader(io.StringIO(formats.csv_text(book))))
    alpha_csv = next(r for r in rows if r["tenant"] == "alpha")
    assert (alpha_csv["hours"], alpha_csv["cost"], alpha_csv["currency"]) == ("1.028333", "2.056666", "USD")


def test_a_pool_without_a_currency_shows_bare_amounts(tmp_path: Path) -> None:
    root = tmp_path / "org"
    for rel, text in ORG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    book = book_of(validate_repo(root).model)
    assert "currency" not in json.loads(formats.json_text(book))["rows"][0]
    row = next(line for line in formats.table(book).splitlines() if line.startswith("alpha "))
    assert row.split()[-2:] == ["2", "2.06"]


def test_the_currency_is_three_upper_case_letters(tmp_path: Path) -> None:
    root = tmp_path / "org"
    for rel, text in ORG.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text.replace('pricePerAcceleratorHour: "2.00"\n',
                                             'pricePerAcceleratorHour: "2.00"\n  currency: dollars\n'))
    (finding,) = validate_repo(root).findings
    assert finding.rule == "GG003" and "an ISO 4217 currency code" in finding.message


def test_the_capacity_report_names_each_pools_currency(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gpugov capacity --usage`: costs for people with the currency of the declared pool's price."""
    import shutil

    from gpugov.cli import main

    fixtures = FIXTURES / "ledger"
    org = tmp_path / "org"
    shutil.copytree(fixtures / "org", org)
    h100 = org / "hardware/h100.yaml"
    h100.write_text(h100.read_text().replace('pricePerAcceleratorHour: "2.50"\n',
                                             'pricePerAcceleratorHour: "2.50"\n  currency: EUR\n'))
    assert main(["capacity", str(org), "--usage", str(fixtures / "lab-window.json")]) == 0
    markdown = capsys.readouterr().out
    nlp = next(line for line in markdown.splitlines() if line.startswith("| nlp | h100 |"))
    assert nlp.endswith("| 12000.00 EUR |")
    vision = next(line for line in markdown.splitlines() if line.startswith("| vision | a100 |"))
    assert not vision.endswith("EUR |")  # a100 declares no currency
    assert main(["capacity", str(org), "--usage", str(fixtures / "lab-window.json"), "--format", "json"]) == 0
    (cluster,) = json.loads(capsys.readouterr().out)["clusters"]
    usage = {(u["tenant"], u["pool"]): u for u in cluster["usage"]}
    assert (usage[("nlp", "h100")]["cost"], usage[("nlp", "h100")]["currency"]) == ("12000", "EUR")
    assert "currency" not in usage[("vision", "a100")]


def test_every_cost_of_the_example_organisation_carries_its_currency() -> None:
    """The example org prices its pools in USD (spec.currency): every cost and rate a person reads of its
    ledger says so, in the table, the markdown and the closing line (they were bare numbers)."""
    from tests.helpers.repos import REPO

    model = validate_repo(REPO).model
    assert model is not None
    for cluster in ("east", "west"):
        book = ledger(model, cluster, Window(T0, T0 + timedelta(hours=1)), [])
        assert book.capacity and all(book.currency(c.pool) for c in book.capacity)
        table, markdown = formats.table(book), formats.markdown(book)
        # every row ends with a cost (tenants, pools, totals) and the closing line with a sum: all in USD
        rows = [line.rstrip(" |") for line in (table + markdown).splitlines()
                if re.search(r"\d\.\d", line) and not line.startswith(("usage of", "#", "**", "_"))]
        assert len(rows) > 10 and all(row.endswith(" USD") for row in rows), [r for r in rows if not r.endswith("USD")]
        closing = table.splitlines()[-1]
        assert closing.startswith("ledger closes: ") and closing.count(" USD") == 3
