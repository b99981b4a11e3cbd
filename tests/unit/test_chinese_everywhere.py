"""No English where a Chinese reader reads (issue #39): the real commands, run under LANG=zh_CN.UTF-8 or
`--lang zh` (before or after the command), print their text, markdown, GitHub and HTML output in Chinese.

`english()` finds every word of English prose left in an output: what remains once the names a reader
typed or reads as names are set aside (the organisation's declared names and values, Kubernetes kinds
and fields, product names, units), code spans, identifiers (with a digit, a dot, a slash, ...) and
what another program wrote (a YAML parser's message, Kueue's own condition, JSON). Its own test
shows that it finds English in a Chinese sentence and that it passes the Chinese one.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpugov import i18n
from gpugov.cli import build_parser, main
from tests.helpers.repos import REPO, write

# Not English prose: product, kind, field and unit names, as the Chinese README writes them too.
NAMES = frozenset("""
gpugov Kueue Volcano Kubernetes NVIDIA Ascend HAMi Prometheus DCGM GFD NVML Argo CD Flux Pulumi GitHub
GPU GPUs NPU CPU MIG vGPU vNPU JSON YAML ASCII HTML URL SVG CSV UTC ISO RBAC CEL API FIFO TAS
ClusterQueue ClusterQueues LocalQueue LocalQueues Cohort Cohorts ResourceFlavor ResourceFlavors Workload Workloads
WorkloadPriorityClass PriorityClass Job Jobs Pod Pods Node Nodes Namespace ConfigMap Queue Queues PodGroup
ValidatingAdmissionPolicy ValidatingAdmissionPolicyBinding CronJob Deployment kube system uid
StrictFIFO BestEffortFIFO stopPolicy Hold None nominalQuota borrowingLimit lendingLimit flavor flavors
Tenant Department Pool Cluster Guardrails AcceleratorModel QuotaGrant QuotaWindow HEAD cohort JavaScript
JobSet StatefulSet
h m s x kubeconfig context cluster reidentify allow mass prune
""".split())

# Words around a code (a rule id, a state) that only mark it: [GG001], ::error.
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
WORD = re.compile(r"[A-Za-z]+")


def example_org(where: Path) -> Path:
    """A copy of the example organisation's declarations."""
    root = where / "org"
    for folder in ("hardware", "policies", "tenants"):
        shutil.copytree(REPO / folder, root / folder)
    return root


def declared_names(root: Path) -> set[str]:
    """Every scalar without a space in the declarations: names, labels, models, periods, ..."""
    return {value for value in declared_values(root) if " " not in value}


def declared_phrases(root: Path) -> tuple[str, ...]:
    """The declarations' own sentences (descriptions): the organisation's words, shown as written."""
    return tuple(sorted((value for value in declared_values(root) if " " in value), key=len, reverse=True))


def declared_values(root: Path) -> set[str]:
    names: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            names.add(value)

    for path in sorted(root.rglob("*.yaml")):
        try:
            for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
                walk(document)
        except yaml.YAMLError:
            continue  # a trap of the test itself
    return names


def english(text: str, names: set[str] | frozenset[str] = frozenset(), exempt: tuple[str, ...] = ()) -> list[str]:
    """The English words in `text`, in order (empty when a Chinese reader meets none)."""
    for other in exempt:  # another program's words, as it wrote them
        text = text.replace(other, " ")
    text = re.sub(r"`[^`\n]*`", " ", text)  # code spans
    text = re.sub(r"\bgpugov [a-z]+\b", " ", text)  # a command, as typed
    text = re.sub(r"https?://\S+", " ", text)
    found = []
    for token in CJK.sub(" ", text).split():
        token = token.strip("()[]{}<>\"',.:;!?*|#+-=~")
        if not token or token in names or token in NAMES:
            continue
        if re.search(r"[0-9/._=@:\\$%]", token):  # an identifier, a path, a quantity, a resource name
            continue
        for word in WORD.findall(token):
            if word not in NAMES and word not in names and len(word) > 1 and not word.isupper():
                found.append(word)
            elif word.isupper() and len(word) > 3 and word not in NAMES:  # RISK, TENANT: shouted English
                found.append(word)
    return found


def test_english_finds_english_and_passes_chinese() -> None:
    assert english("资源池 h100 中还需要 8 nvidia.com/gpu（ClusterQueue vision）", {"vision"}) == []
    assert english("预计开始: never, as declared: never-fits") == ["never", "as", "declared", "never", "fits"]
    assert english("tenants/a.yaml:3:1: error: 文档 [GG003]") == ["error"]
    assert english("状态: pending") == ["pending"] and english("RISK 风险") == ["RISK"]
    assert english("`gpugov apply --cluster east` 和 Kueue: insufficient quota", exempt=("Kueue: insufficient quota",)) == []


@pytest.fixture
def chinese(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in i18n.LOCALE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    yield
    i18n.use(i18n.ENGLISH)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def readable(output: str, fmt: str) -> str:
    """What a person reads of an output: an HTML page's text (not its scripts' data), GitHub's
    annotation texts (not the workflow command), the rest as it is."""
    if fmt == "html":
        body = re.sub(r"<(script|style)\b.*?</\1>", " ", output, flags=re.DOTALL)
        return html_lib.unescape(re.sub(r"<[^>]+>", " ", body))
    if fmt == "markdown":  # what GitHub renders: no comments, no tags
        return re.sub(r"<!--.*?-->|<[^>]+>", " ", output, flags=re.DOTALL)
    if fmt == "github":
        return "\n".join(line.partition("::")[2].partition("::")[2] or line for line in output.splitlines())
    return output


# --- validate: levels, messages, hints (the YAML traps), in every format people read ---------------

TRAPS = {
    "tenants/colon.yaml": "apiVersion: gpugov.io/v1alpha1\nkind: Tenant\nmetadata：\n  name: colon\n",
    "tenants/value.yaml": "apiVersion: gpugov.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: value\n"
                          "  annotations:\n    description: 自动驾驶: 感知\n",
    "tenants/tab.yaml": "apiVersion: gpugov.io/v1alpha1\nkind: Tenant\nmetadata:\n\tname: tab\n",
    "tenants/empty.yaml": "",
}


@pytest.fixture(scope="module")
def trapped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example organisation with the YAML traps Chinese input methods set, and an empty file (a warning)."""
    root = example_org(tmp_path_factory.mktemp("traps"))
    for rel, text in TRAPS.items():
        write(root, rel, text)
    return root


@pytest.mark.parametrize("fmt", ["text", "markdown", "github"])
def test_validate_speaks_chinese(trapped: Path, fmt: str, chinese: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["validate", str(trapped), "--format", fmt], capsys)
    assert code == 1, err
    as_json = json.loads(run(["validate", str(trapped), "--format", "json"], capsys)[1])
    parser_words = tuple(f["message"] for f in as_json["findings"] if f["rule"] == "GG001")  # libyaml's own
    assert {f["rule"] for f in as_json["findings"]} == {"GG001", "GG005"} and len(parser_words) == 3
    typed = {word for text in TRAPS.values() for word in WORD.findall(text)}  # the reader's own lines, quoted
    assert english(readable(out, fmt), declared_names(trapped) | typed, parser_words) == [], out
    if fmt == "text":
        assert "错误: " in out and "警告: " in out and "全角冒号" in out


def test_render_and_its_refusals_speak_chinese(trapped: Path, tmp_path: Path, chinese: None,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["render", str(REPO), "--cluster", "east", "--out", str(tmp_path / "out")], capsys)
    assert code == 0 and english(out.replace(str(tmp_path), " ")) == [], out + err
    code, out, err = run(["render", str(REPO), "--out", str(tmp_path / "out")], capsys)  # which cluster?
    assert code == 2 and english(err, declared_names(REPO)) == [], err
    code, out, err = run(["render", str(trapped), "--cluster", "east", "--out", str(tmp_path / "out")], capsys)
    assert code == 1 and english(err.splitlines()[-1]) == [], err  # refusing to continue


# --- plan, capacity, guide ---------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_plan_speaks_chinese(tmp_path: Path, fmt: str, chinese: None, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.unit.test_plan import make_repo, raise_quota

    repo = make_repo(tmp_path, raise_quota)
    argv = ["plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", fmt]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    risks = {r["id"] for r in json.loads(run([*argv[:-1], "json"], capsys)[1])["risks"]}  # ids, as rule ids
    assert risks and english(readable(out, fmt), declared_names(repo) | risks) == [], out


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_capacity_speaks_chinese(fmt: str, chinese: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["capacity", str(REPO), "--format", fmt, "--lang", "zh"], capsys)
    assert code == 0, err
    assert english(readable(out, fmt), declared_names(REPO)) == [], readable(out, fmt)
    if fmt == "html":
        assert '<html lang="zh-CN">' in out


def test_guide_speaks_chinese(chinese: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["guide", "nlp", str(REPO)], capsys)
    assert code == 0, err
    samples = tuple(re.findall(r"```.*?```", out, re.DOTALL))  # the sample Jobs: YAML a tenant copies
    assert english(out, declared_names(REPO), samples + declared_phrases(REPO)) == [], out


# --- queue and why, through a fake Kubernetes API with Kueue's objects ----------------------------

@pytest.fixture
def kueue(tmp_path: Path) -> Iterator[tuple[str, tuple[str, ...]]]:
    """A cluster where vision runs one job, one waits for quota (first in line) and one can never fit;
    yields the kubeconfig and Kueue's own messages."""
    from tests.helpers.local_http import serving
    from tests.unit.test_queueing_reader import KUEUE, SSAR, VIS, FakeApi, access, kube_list, pending_pages
    from tests.unit.test_queueing_unit import NOW, QUOTA_WAIT, TOO_BIG, raw_cluster_queue, raw_workload

    running, waiting, too_big = (raw_workload("run", gpus=8, admitted=NOW),
                                 raw_workload("wait", gpus=8, message=QUOTA_WAIT),
                                 raw_workload("big", gpus=24, message=TOO_BIG))
    local_queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                   "metadata": {"name": "training", "namespace": "vision"}, "spec": {"clusterQueue": "vision"}}
    pending = [{"metadata": {"name": w["metadata"]["name"], "namespace": "vision"}, "positionInClusterQueue": i,
                "positionInLocalQueue": i, "priority": 10000, "localQueueName": "training"}
               for i, w in enumerate([waiting, too_big])]
    FakeApi.routes, FakeApi.seen, FakeApi.identities = {
        SSAR: access({"vision"}, cluster_wide=True),
        ("GET", f"{KUEUE}/clusterqueues"): lambda *_: kube_list("ClusterQueue", [raw_cluster_queue("vision")]),
        ("GET", f"{KUEUE}/localqueues"): lambda *_: kube_list("LocalQueue", [local_queue]),
        ("GET", f"{KUEUE}/workloads"): lambda *_: kube_list("Workload", [running, waiting, too_big]),
        ("GET", f"{VIS}/vision/pendingworkloads"): pending_pages(pending),
    }, [], []
    with serving(FakeApi) as url:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": url}}], "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        yield str(kubeconfig), (QUOTA_WAIT, TOO_BIG)


def kueue_lines(messages: tuple[str, ...]) -> tuple[str, ...]:
    """Kueue's own condition, quoted as Kueue wrote it."""
    return tuple(f"Kueue: {m}" for m in messages)


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_queue_speaks_chinese(kueue: tuple[str, tuple[str, ...]], fmt: str, chinese: None,
                              capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, _messages = kueue
    code, out, err = run(["queue", str(REPO), "--cluster", "east", "--kubeconfig", kubeconfig, "--format", fmt], capsys)
    assert code == 1, err  # one job can never fit: a finding
    assert english(out, declared_names(REPO)) == [], out
    assert "已准入" in out and "等待中" in out


@pytest.mark.parametrize("job", ["vision/wait", "vision/big"])
@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_why_speaks_chinese(kueue: tuple[str, tuple[str, ...]], job: str, fmt: str, chinese: None,
                            capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig, messages = kueue
    code, out, err = run(["why", job, str(REPO), "--cluster", "east", "--kubeconfig", kubeconfig, "--format", fmt],
                         capsys)
    assert code in (0, 1), err
    workload = re.findall(r"Workload (job-\S+?-abcde)", out)
    assert english(out, declared_names(REPO) | set(workload), kueue_lines(messages)) == [], out
    assert "never-fits" not in out


# --- the wrong cluster, budgets ------------------------------------------------------------------------

def test_the_wrong_cluster_is_refused_in_chinese(tmp_path: Path, chinese: None,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers.fake_kube import fake_kube

    root = example_org(tmp_path)
    clusters = root / "policies/clusters.yaml"
    other = "00000000-0000-4000-8000-0000000000ff"
    clusters.write_text(clusters.read_text().replace(
        "  backend: kueue\n", f"  backend: kueue\n  identity: {{kubeSystemUID: {other}}}\n", 1))
    with fake_kube() as fake:
        code, out, err = run(["apply", str(root), "--cluster", "east", "--kubeconfig", str(fake.kubeconfig(tmp_path)),
                              "--lang", "zh"], capsys)
        host, writes = fake.url, fake.writes
    assert code == 2 and out == "" and writes == [], err
    assert english(err.replace(host, " "), declared_names(root)) == [], err
    assert "已拒绝" in err and other in err


def test_apply_dry_run_speaks_chinese(tmp_path: Path, chinese: None, capsys: pytest.CaptureFixture[str]) -> None:
    """What apply would do to each object, the identity line and the tally (a fresh, empty cluster)."""
    from gpugov.app.pipeline import validate_repo
    from gpugov.compile import compile
    from tests.helpers.fake_kube import fake_kube

    model = validate_repo(REPO).model
    assert model is not None
    objects = {o["metadata"]["name"] for o in compile(model, backend="kueue", cluster="east")}  # names, as the API has them
    with fake_kube() as fake:
        code, out, err = run(["apply", str(REPO), "--cluster", "east", "--kubeconfig",
                              str(fake.kubeconfig(tmp_path)), "--dry-run"], capsys)
        host, writes = fake.url, fake.writes
    assert code == 0 and writes == [], err
    assert english(out.replace(host, " "), declared_names(REPO) | objects) == [], out
    assert "将创建" in out and "试运行" in out


def test_budgets_are_told_in_chinese(tmp_path: Path, chinese: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A budget spent and held: the status line and the hold it applies (`gpugov budget --apply`)."""
    from datetime import UTC, datetime, timedelta

    from tests.unit.test_budget import live_queue, run_budget
    from tests.unit.test_queueing_unit import raw_workload

    root = example_org(tmp_path)
    nlp = root / "tenants/nlp.yaml"
    nlp.write_text(nlp.read_text().replace("\nspec:\n", "\nspec:\n  budget: {acceleratorHours: 1, action: hold}\n", 1))
    started = datetime.now(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0) + timedelta(minutes=1)
    running = raw_workload("big", "nlp-train", gpus=8, flavor="h100", cluster_queue="nlp", admitted=started)
    code, writes = run_budget(tmp_path, root, [running],
                              {"nlp": live_queue("nlp", "None")}, "--cluster", "east", "--apply")
    out, err = capsys.readouterr()
    assert code == 1 and len(writes) == 1, err  # spent: alerted and held
    assert "nlp" in out and english(out + err, declared_names(root)) == [], out + err


def test_the_ledgers_budget_section_speaks_chinese(tmp_path: Path, chinese: None) -> None:
    """`gpugov usage`'s budgets: who holds each, its unit and action, in the reader's language."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from gpugov.queueing.workload import from_object
    from gpugov.usage import formats
    from gpugov.usage.attribution import attribution
    from gpugov.usage.budget import budget_statuses, period_rows
    from gpugov.usage.ledger import ledger
    from gpugov.usage.segments import segments
    from gpugov.usage.window import Window
    from tests.unit.test_budget import build, workload

    root, model = build(tmp_path)
    now = datetime(2026, 12, 3, 12, tzinfo=UTC)
    rules = attribution(model, "default", [])
    workloads = [from_object(workload("a", "alpha", now - timedelta(hours=3), 4))]
    window = Window(now - timedelta(hours=1), now)
    found, _ = segments(workloads, window, now, rules.tenant_of, rules.offers)
    statuses = budget_statuses(model, period_rows(model, "default", workloads, rules, now), now)
    book = replace(ledger(model, "default", window, found), budgets=tuple(s.line() for s in statuses))
    i18n.use("zh_CN")
    table = formats.table(book)
    budgets = table[table.index(i18n._("GPU-hour budgets, spent this period (not this window):")):]
    assert "alpha" in budgets and english(budgets, declared_names(root)) == [], budgets
    assert "tenant 'alpha'" in formats.json_text(book)  # JSON keeps the English


# --- --lang before or after the command, for every command ---------------------------------------------

def parsers(parser: object, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


def test_lang_is_taken_after_every_command() -> None:
    every = list(parsers(build_parser()))
    assert len(every) > 25
    for path, parser in every:
        assert "--lang" in parser._option_string_actions, path  # type: ignore[attr-defined]
    from gpugov.cli import parse

    assert parse(["validate", "repo", "--lang", "zh"]).ui_language == "zh_CN"
    assert parse(["--lang", "zh", "validate", "repo"]).ui_language == "zh_CN"
    assert parse(["--lang", "zh", "validate", "repo", "--lang", "en"]).ui_language == "en"  # the last one said
    assert parse(["validate", "repo"]).ui_language is None


def test_lang_after_the_command_prints_what_lang_before_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    after = run(["validate", str(REPO), "--lang", "zh"], capsys)
    before = run(["--lang", "zh", "validate", str(REPO)], capsys)
    i18n.use(i18n.ENGLISH)
    assert after == before and "已检查" in after[1]
