"""`gpugov guide TENANT` (issue #30): a tenant's guide from the declarations, in English and Chinese, whose
sample Jobs go through the tenant's own queues and pass the cluster's admission policies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpugov.app.revision import valid_revision
from gpugov.cli import main
from gpugov.cli.guide import language
from gpugov.guide import render, tenant_facts
from gpugov.kube.names import KUEUE_API, KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL, VOLCANO_QUEUE_ANNOTATION
from tests.helpers.golden import assert_golden_file
from tests.helpers.repos import GOLDEN, REPO, write
from tests.helpers.vap_eval import Request, evaluate


def guide(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["guide", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_guide_of_the_example_org_matches_its_golden_file(capsys, lang: str) -> None:
    code, out, err = guide(["speech", str(REPO), "--lang", lang], capsys)  # a Kueue and a Volcano cluster, MIG
    assert code == 0, err
    assert_golden_file(GOLDEN / "guide" / f"speech.{lang}.md", out)


def samples(markdown: str) -> list[dict]:
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", markdown, re.DOTALL)]


@pytest.fixture(scope="module")
def example():
    revision = valid_revision(REPO)
    return revision.model, revision.compiled


@pytest.mark.parametrize("tenant", ["nlp", "speech", "vision", "inference", "data-platform", "recsys"])
def test_every_sample_goes_through_a_queue_of_the_tenant_and_is_admitted(example, tenant: str) -> None:
    model, compiled = example
    facts = tenant_facts(model, compiled, tenant)
    jobs = samples(render(facts))
    assert len(jobs) == len(facts.pools) >= 1
    declared = {(q.namespace, q.name): q.priority_classes for q in model.tenants[tenant].queues}
    for pool, job in zip(facts.pools, jobs, strict=True):
        objects = compiled[pool.cluster]
        namespace = job["metadata"]["namespace"]
        assert namespace in model.tenants[tenant].namespaces
        pod = job["spec"]["template"]["spec"]
        asked = pod["containers"][0]["resources"]["requests"]
        assert asked[pool.resource] == "1"
        if pool.backend == "kueue":
            labels = job["metadata"]["labels"]
            queue = labels[KUEUE_QUEUE_LABEL]
            local = [o for o in objects if o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == namespace
                     and o["metadata"]["name"] == queue]
            assert local, f"{namespace}/{queue} is not a compiled LocalQueue"
            allowed = declared[(namespace, queue)] or [p for p, pc in model.priority_classes.items() if pc.preemptible]
            assert labels[KUEUE_PRIORITY_LABEL] in allowed
            flavor = next(o for o in objects if o["kind"] == "ResourceFlavor" and o["apiVersion"] == KUEUE_API
                          and o["metadata"]["name"] == pool.pool)
            assert pod["nodeSelector"] == flavor["spec"]["nodeLabels"]  # pinned to this pool's flavor
            cq = next(o for o in objects if o["kind"] == "ClusterQueue"
                      and o["metadata"]["name"] == local[0]["spec"]["clusterQueue"])
            covered = {r for g in cq["spec"]["resourceGroups"] for r in g["coveredResources"]}
            assert set(asked) <= covered  # Kueue admits no request for a resource the queue does not cover
        else:
            annotations = job["spec"]["template"]["metadata"]["annotations"]
            assert annotations[VOLCANO_QUEUE_ANNOTATION] == tenant and pod["schedulerName"] == "volcano"
        # The cluster's admission policies (evaluated as the apiserver does) let it in.
        request = Request("CREATE", "batch", "jobs", namespace, "someone@example.com")
        assert evaluate(objects, request, job) == []


def test_a_sample_without_its_queue_label_is_refused(example) -> None:
    # The check above can fail: the same Job without the label the guide tells users to set is denied.
    model, compiled = example
    facts = tenant_facts(model, compiled, "nlp")
    job = samples(render(facts))[0]
    del job["metadata"]["labels"][KUEUE_QUEUE_LABEL]
    request = Request("CREATE", "batch", "jobs", job["metadata"]["namespace"], "someone@example.com")
    assert evaluate(compiled["east"], request, job) != []
    job["metadata"]["labels"][KUEUE_QUEUE_LABEL] = "training"
    job["metadata"]["labels"][KUEUE_PRIORITY_LABEL] = "inference-critical"  # not one of the queue's classes
    assert evaluate(compiled["east"], request, job) != []


def test_the_guide_names_queues_owners_and_commands(capsys) -> None:
    code, out, _ = guide(["nlp", str(REPO)], capsys)
    assert code == 0
    assert "| east | `nlp-train` | `training` | `batch-low`, `training-high` |" in out
    assert "| east | `nlp-dev` | `dev` | `batch-low` |" in out
    assert "`alice@example.com`, `nlp-team`, `@example-org/nlp`" in out
    assert "`@example-org/gpu-platform`" in out
    assert f"`{KUEUE_QUEUE_LABEL}: <queue>`" in out and f"`{KUEUE_PRIORITY_LABEL}: <class>`" in out
    assert "`gpugov queue --cluster east --tenant nlp`" in out
    assert "`gpugov why nlp-train/nlp-h100-sample --cluster east`" in out
    # issue #39: nlp's borrowing limit is 16, but the research tree lends it at most 12 (Kueue's maximum
    # capacity 28: 8 kept local by its lending limit + the tree's 20), the number `gpugov capacity` says too
    assert "| east | `h100` | H100-80GB | `nvidia.com/gpu` | 16 | 12 |" in out


def test_both_languages_hold_the_same_facts(example) -> None:
    model, compiled = example
    facts = tenant_facts(model, compiled, "vision")
    en, zh = render(facts, "en"), render(facts, "zh")
    assert samples(en) == samples(zh)
    assert en.count("\n## ") == zh.count("\n## ")
    assert "## Your queues" in en and "## 你的队列" in zh
    def names(text: str) -> list[str]:  # inline code outside the YAML blocks, placeholders (<queue>) aside
        prose = re.sub(r"```yaml\n.*?```", "", text, flags=re.DOTALL)
        return sorted({span for span in re.findall(r"`[^`\n]+`", prose) if "<" not in span})

    assert len(names(en)) > 15
    assert names(en) == names(zh)  # every name, label and command in both


@pytest.mark.parametrize(
    ("environ", "lang"),
    [({}, "en"), ({"LANG": "zh_CN.UTF-8"}, "zh"), ({"LANG": "en_US.UTF-8"}, "en"),
     ({"LANG": "en_US.UTF-8", "LC_MESSAGES": "zh_CN.UTF-8"}, "zh"), ({"LC_ALL": "C", "LANG": "zh_CN"}, "en")],
)
def test_the_language_comes_from_the_locale(environ: dict[str, str], lang: str) -> None:
    assert language(environ) == lang


def test_lang_zh_from_the_environment(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert guide(["nlp", str(REPO)], capsys)[1].startswith("# 租户 `nlp` 的 GPU 使用指南\n")
    assert guide(["nlp", str(REPO), "--lang", "en"], capsys)[1].startswith("# GPU guide for tenant `nlp`\n")


def test_out_writes_the_file(tmp_path: Path, capsys) -> None:
    target = tmp_path / "nlp.md"
    code, out, _ = guide(["nlp", str(REPO), "--out", str(target), "--lang", "en"], capsys)
    assert code == 0 and out == ""
    assert target.read_text(encoding="utf-8") == guide(["nlp", str(REPO), "--lang", "en"], capsys)[1]


def test_an_unknown_tenant_is_bad_input(capsys) -> None:
    code, out, err = guide(["nobody", str(REPO)], capsys)
    assert code == 2 and out == ""
    assert err.startswith("gpugov: guide: no tenant 'nobody' is declared (tenants: data-platform, ")


def test_declarations_with_errors_are_refused(base_repo: Path, capsys) -> None:
    write(base_repo, "tenants/alpha.yaml", (base_repo / "tenants" / "alpha.yaml").read_text() + "  bogus: 1\n")
    code, out, err = guide(["alpha", str(base_repo)], capsys)
    assert code == 1 and out == ""
    assert "refusing to continue: the declarations have errors" in err


def test_a_repository_written_by_init_has_a_guide(tmp_path: Path, capsys) -> None:
    assert main(["init", str(tmp_path / "org"), "--tenant", "vision", "--pool", "h100"]) == 0
    capsys.readouterr()
    code, out, _ = guide(["vision", str(tmp_path / "org"), "--lang", "en"], capsys)
    assert code == 0
    (job,) = samples(out)
    assert job["metadata"]["labels"] == {KUEUE_QUEUE_LABEL: "default", KUEUE_PRIORITY_LABEL: "batch"}
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"gpugov.io/pool": "h100"}
