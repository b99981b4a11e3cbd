"""Messages in Simplified Chinese through gettext (issue #30): the CLI under LANG=zh_CN.UTF-8 prints a
finding's hint, a queue reason and a chat payload in Chinese; LANG=C stays English; the shipped .mo is
the compiled .po and every message in the sources has a zh_CN translation."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from gpugov import i18n
from tests.helpers.local_http import serving
from tests.helpers.repos import REPO, overlay_repo

LOCALES = REPO / "gpugov" / "locale"
PO = LOCALES / "zh_CN" / "LC_MESSAGES" / "gpugov.po"
MO = PO.with_suffix(".mo")
GG012_CASE = REPO / "tests" / "examples" / "negative" / "GG012-namespace-in-two-tenants"
GG012_HINT_EN = ("A namespace belongs to exactly one tenant: access is per namespace (the tenant's RoleBindings let "
                 "its owners and members submit there, and gpugov-queue-access lets a workload name any queue of its "
                 "namespace), so two tenants' queues in one namespace would let each tenant's members spend the other's "
                 "quota, and reclaim, the queue view and the namespace's gpugov.io/tenant label know one tenant per "
                 "namespace. Give each tenant a namespace of its own.")
GG012_HINT_ZH = ("一个命名空间只能属于一个租户：访问控制以命名空间为单位（租户的 RoleBinding 允许其负责人和成员在那里提交工作，"
                 "gpugov-queue-access 允许工作负载使用其命名空间中的任何队列），因此两个租户的队列在同一个命名空间中会让"
                 "每个租户的成员花掉另一个租户的配额；回收、队列视图和命名空间的 gpugov.io/tenant 标签也都是每个命名空间"
                 "只认一个租户。给每个租户一个自己的命名空间。")
KEYWORDS = {"_": None, "ngettext": (1, 2), "Text": None, "Joined": None, "rule": None}  # as `make messages`


def run(argv: list[str], lang: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in i18n.LOCALE_VARIABLES}
    env |= {"LANG": lang, **extra}
    return subprocess.run([sys.executable, "-m", "gpugov", *argv], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)


# --- the catalogue --------------------------------------------------------------------------

def fresh_messages() -> set[str | tuple[str, ...]]:
    method_map = [("gpugov/**.py", "gpugov.i18n.extract.messages")]
    return {message for _file, _line, message, _comments, _context in
            extract_from_dir(str(REPO), method_map, keywords=KEYWORDS)}


def untranslated(template: Catalog, translations: Catalog) -> list[str]:
    """The template's messages without a non-empty, non-fuzzy translation."""
    missing = []
    for message in template:
        if not message.id:
            continue
        found = translations.get(message.id)
        strings = found.string if found is not None and isinstance(found.string, tuple) else \
            (found.string,) if found is not None else ()
        if found is None or found.fuzzy or not all(strings) or not strings:
            missing.append(str(message.id))
    return missing


def test_the_shipped_mo_is_a_fresh_compile_of_the_po() -> None:
    out = io.BytesIO()
    write_mo(out, read_po(PO.open("rb"), locale="zh_CN"))
    assert MO.read_bytes() == out.getvalue(), "run `make messages` (pybabel compile)"


def test_the_template_holds_every_message_of_the_sources() -> None:
    template = read_po((LOCALES / "gpugov.pot").open("rb"))
    extracted = fresh_messages()
    assert len(extracted) > 250  # the rule table's summaries and hints are in
    assert extracted == {m.id for m in template if m.id}, "run `make messages` and translate the new messages"


def test_every_message_has_a_chinese_translation() -> None:
    template = read_po((LOCALES / "gpugov.pot").open("rb"))
    assert untranslated(template, read_po(PO.open("rb"), locale="zh_CN")) == []


def test_the_catalogue_check_fails_on_an_untranslated_or_fuzzy_message() -> None:
    template, translations = Catalog(), Catalog(locale="zh_CN")
    for message in ("done", "new", "guessed"):
        template.add(message)
    translations.add("done", "完成")
    translations.add("new", "")
    translations.add("guessed", "猜的", flags=("fuzzy",))
    assert untranslated(template, translations) == ["new", "guessed"]


# --- the language ---------------------------------------------------------------------------

@pytest.mark.parametrize(("environ", "language"), [
    ({}, "en"), ({"LANG": "zh_CN.UTF-8"}, "zh_CN"), ({"LANG": "C.UTF-8"}, "en"), ({"LANG": "fr_FR.UTF-8"}, "en"),
    ({"LANG": "en_US.UTF-8", "LC_MESSAGES": "zh_CN.UTF-8"}, "zh_CN"), ({"LC_ALL": "C", "LANG": "zh_CN"}, "en"),
    ({"LANG": "zh_TW.UTF-8"}, "en"), ({"LANG": "zh-Hans"}, "zh_CN"),
])
def test_the_language_comes_from_the_locale(environ: dict[str, str], language: str) -> None:
    assert i18n.from_environment(environ) == language


# --- validate ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gg012_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example organisation with a namespace claimed by two tenants (GG012)."""
    return overlay_repo(tmp_path_factory.mktemp("gg012"), GG012_CASE)


def test_validate_prints_the_hint_in_chinese_under_a_chinese_locale(gg012_repo: Path) -> None:
    zh = run(["validate", str(gg012_repo)], "zh_CN.UTF-8")
    assert zh.returncode == 1, zh.stderr
    assert f"  提示: {GG012_HINT_ZH}\n" in zh.stdout and "[GG012]" in zh.stdout
    assert GG012_HINT_EN not in zh.stdout


def test_english_is_unchanged_and_json_stays_english(gg012_repo: Path) -> None:
    en = run(["validate", str(gg012_repo)], "C")
    assert f"  hint: {GG012_HINT_EN}\n" in en.stdout
    assert run(["--lang", "en", "validate", str(gg012_repo)], "zh_CN.UTF-8").stdout == en.stdout
    data = json.loads(run(["validate", str(gg012_repo), "--format", "json"], "zh_CN.UTF-8").stdout)
    assert {f["hint"] for f in data["findings"] if f["rule"] == "GG012"} == {GG012_HINT_EN}


def test_lang_option_wins_and_an_unknown_language_is_bad_usage(gg012_repo: Path) -> None:
    assert GG012_HINT_ZH in run(["--lang", "zh", "validate", str(gg012_repo)], "C").stdout
    bad = run(["--lang", "fr", "validate", str(gg012_repo)], "C")
    assert bad.returncode == 2 and "no messages in 'fr'" in bad.stderr


def test_the_readme_table_stays_english() -> None:
    zh = run(["rules", "--format", "markdown"], "zh_CN.UTF-8")
    assert zh.stdout == run(["rules", "--format", "markdown"], "C").stdout
    assert "一个命名空间被多个租户声明" in run(["rules"], "zh_CN.UTF-8").stdout


# --- a finding's own message ----------------------------------------------------------------

def messages_of(repo: Path, rule_id: str) -> list[str]:
    """The rule's finding messages as validate finds them, in process: Texts whose value is the English."""
    from gpugov.app.revision import read_revision

    return [f.message for f in read_revision(repo).validation.findings if f.rule == rule_id]


# GG015's messages hold a Text (the reserved namespace's reason) inside a Text; GG012's a Joined list of them.
@pytest.mark.parametrize("case", ["GG012-namespace-in-two-tenants", "GG015-reserved-namespace"])
def test_validate_prints_a_findings_message_in_chinese(case: str, tmp_path: Path) -> None:
    repo = overlay_repo(tmp_path, REPO / "tests" / "examples" / "negative" / case)
    rule_id = case.split("-")[0]
    messages = messages_of(repo, rule_id)
    assert messages and all(isinstance(m, i18n.Text) for m in messages)
    zh = run(["validate", str(repo)], "zh_CN.UTF-8")
    assert zh.returncode == 1, zh.stderr
    for english in messages:
        chinese = i18n.localized(english, i18n.translator("zh_CN"))  # the catalogue's words, not this test's
        assert chinese != english and any("\u4e00" <= c <= "\u9fff" for c in chinese), english
        assert f"{chinese} [{rule_id}]\n" in zh.stdout
        assert english not in zh.stdout


def test_a_findings_message_stays_english_in_json_and_under_lang_c(gg012_repo: Path) -> None:
    english = [str(m) for m in messages_of(gg012_repo, "GG012")]
    data = json.loads(run(["validate", str(gg012_repo), "--format", "json"], "zh_CN.UTF-8").stdout)
    assert sorted(f["message"] for f in data["findings"] if f["rule"] == "GG012") == sorted(english)
    en = run(["validate", str(gg012_repo)], "C").stdout
    assert all(f": error: {message} [GG012]\n" in en for message in english)
    assert not any("\u4e00" <= c <= "\u9fff" for c in en)


# --- a chat payload ---------------------------------------------------------------------------

class Feishu(BaseHTTPRequestHandler):
    """A Feishu custom bot: keeps each body, answers code 0."""

    bodies: list[dict] = []  # noqa: RUF012 (one test at a time)
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with self.lock:
            type(self).bodies.append(body)
        reply = b'{"code":0,"msg":"success"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def feishu() -> Iterator[str]:
    Feishu.bodies = []
    with serving(Feishu) as url:
        yield f"{url}/open-apis/bot/v2/hook/t"


def notify(report: Path, tmp_path: Path, lang: str, url: str, config: dict | None = None) -> dict:
    argv = ["notify", str(report), "--notify", "feishu", "--title", "gpugov drift: east",
            "--notify-state", str(tmp_path / f"state-{len(Feishu.bodies)}.json")]
    if config is not None:
        path = tmp_path / "notify.yaml"
        path.write_text(yaml.safe_dump(config))
        argv += ["--notify-config", str(path)]
    done = run(argv, lang, GPUGOV_FEISHU_WEBHOOK_URL=url, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    assert done.returncode == 0, done.stderr
    return Feishu.bodies[-1]["content"]["post"]["zh_cn"]


@pytest.fixture
def report(gg012_repo: Path, tmp_path: Path) -> Path:
    path = tmp_path / "report.json"
    path.write_text(run(["validate", str(gg012_repo), "--format", "json"], "C").stdout)
    return path


def test_the_feishu_post_under_zh_cn_is_chinese(report: Path, tmp_path: Path, feishu: str) -> None:
    post = notify(report, tmp_path, "zh_CN.UTF-8", feishu)
    rows = [row[0]["text"] for row in post["content"]]
    assert rows[0] == "2 个错误" and rows[1].startswith("[错误] GG012 ")
    english = notify(report, tmp_path, "C", feishu)
    assert [row[0]["text"] for row in english["content"]][:2] == ["2 errors", rows[1].replace("[错误]", "[error]")]


def test_a_sinks_own_language_wins_over_the_commands(report: Path, tmp_path: Path, feishu: str) -> None:
    post = notify(report, tmp_path, "C", feishu, {"feishu": {"lang": "zh_CN"}})
    assert post["content"][0][0]["text"] == "2 个错误"
    post = notify(report, tmp_path, "zh_CN.UTF-8", feishu, {"feishu": {"lang": "en"}})
    assert post["content"][0][0]["text"] == "2 errors"


# --- a queue reason ---------------------------------------------------------------------------

def test_why_tells_the_queue_reason_in_chinese(tmp_path: Path) -> None:
    from tests.unit.test_queueing_reader import KUEUE, SSAR, VIS, FakeApi, access, kube_list, pending_pages
    from tests.unit.test_queueing_unit import TOO_BIG, raw_cluster_queue, raw_workload

    workload = raw_workload("big", gpus=24, message=TOO_BIG)
    local_queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                   "metadata": {"name": "training", "namespace": "vision"}, "spec": {"clusterQueue": "vision"}}
    FakeApi.routes, FakeApi.seen, FakeApi.identities = {
        SSAR: access({"vision"}, cluster_wide=True),
        ("GET", f"{KUEUE}/clusterqueues"): lambda *_: kube_list("ClusterQueue", [raw_cluster_queue("vision")]),
        ("GET", f"{KUEUE}/localqueues"): lambda *_: kube_list("LocalQueue", [local_queue]),
        ("GET", f"{KUEUE}/workloads"): lambda *_: kube_list("Workload", [workload]),
        ("GET", f"{VIS}/vision/pendingworkloads"): pending_pages([]),
    }, [], []
    with serving(FakeApi) as url:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": url}}], "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        argv = ["why", "vision/big", str(REPO), "--cluster", "east", "--kubeconfig", str(kubeconfig)]
        zh = run(argv, "zh_CN.UTF-8", NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
        en = run(argv, "C", NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
        data = json.loads(run([*argv, "--format", "json"], "zh_CN.UTF-8", NO_PROXY="127.0.0.1").stdout)
    assert en.returncode == 1, en.stderr
    assert "  why: exceeds vision's maximum, can never fit as declared: it asks 24 nvidia.com/gpu" in en.stdout
    assert zh.returncode == 1, zh.stderr
    assert "  原因: 超出 vision 的上限，按当前声明永远无法容纳：它请求 24 nvidia.com/gpu" in zh.stdout
    assert TOO_BIG in zh.stdout  # Kueue's own words are not translated
    assert data["workload"]["message"].startswith("exceeds vision's maximum")


# --- the pull-request comment and the reports ------------------------------------------------

def chinese(msgid: str) -> str:
    """`msgid` as the shipped zh_CN catalogue tells it (never hard-coded here), which must differ."""
    told = i18n.translator("zh_CN").gettext(msgid)
    assert told != msgid, f"no zh_CN translation of {msgid!r} in {PO.name}"
    return told


def test_the_plans_pull_request_comment_is_chinese_under_a_chinese_locale(tmp_path: Path) -> None:
    from tests.unit.test_plan import make_repo, raise_quota

    repo = make_repo(tmp_path, raise_quota)
    argv = ["plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown"]
    zh, en = run(argv, "zh_CN.UTF-8"), run(argv, "C")
    assert zh.returncode == en.returncode == 0, zh.stderr + en.stderr
    header = ("who", "pool", "resource", "nominal", "borrowing limit", "lending limit")
    base, head = en.stdout.splitlines()[1].split("`")[1::2]  # "HEAD~1 (8e2d715a)", as the English heading says
    for english, told in (("**Quota changes**", chinese("**Quota changes**")),
                          ("**Guaranteed quota against capacity**", chinese("**Guaranteed quota against capacity**")),
                          ("| " + " | ".join(header) + " |", "| " + " | ".join(map(chinese, header)) + " |"),
                          ("**Risks (1)**", chinese("**Risks ({count})**").format(count=1)),
                          (f"### gpugov plan: `{base}` → `{head}`",
                           chinese("### gpugov plan: `{base}` → `{head}`").format(base=base, head=head))):
        assert told in zh.stdout.splitlines() and english not in zh.stdout
        assert english in en.stdout.splitlines() and told not in en.stdout
    assert "(GP014)" in zh.stdout and "| tenant `alpha` | a100 | nvidia.com/mig-1g.10gb |" in en.stdout  # ids stay
    assert run([*argv[:-1], "json"], "zh_CN.UTF-8").stdout == run([*argv[:-1], "json"], "C").stdout
    assert run(["--lang", "en", *argv], "zh_CN.UTF-8").stdout == en.stdout


def test_the_plans_risk_is_told_in_chinese_and_its_json_stays_english(tmp_path: Path) -> None:
    from gpugov.plan.removal import drain_hint
    from tests.unit.test_plan import make_repo, remove_tenant

    repo = make_repo(tmp_path, remove_tenant)
    argv = ["plan", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--format", "text"]
    zh, en = run(argv, "zh_CN.UTF-8"), run(argv, "C")
    assert zh.returncode == en.returncode == 0, zh.stderr + en.stderr
    removed, hint = "tenant {name} is removed: {drain}; its namespaces are kept", drain_hint("ClusterQueue", "beta")
    english = "RISK tenant-removed (GP002): " + removed.format(name="beta", drain=hint)
    told = chinese("RISK {id} ({rule}): {message}").format(id="tenant-removed", rule="GP002", message=chinese(
        removed).format(name="beta", drain=chinese(hint.msgid).format(name="beta")))
    assert english in en.stdout.splitlines() and told in zh.stdout.splitlines()
    assert english not in zh.stdout and "drain ClusterQueue beta first" not in zh.stdout
    as_json = [*argv[:-1], "json"]
    assert run(as_json, "zh_CN.UTF-8").stdout == run(as_json, "C").stdout  # JSON keeps the English message


def test_the_capacity_report_in_markdown_is_chinese_under_a_chinese_locale() -> None:
    from tests.unit.test_capacity_report import ORG, WINDOW

    argv = ["capacity", str(ORG), "--usage", str(WINDOW), "--format", "markdown"]
    zh, en = run(argv, "zh_CN.UTF-8"), run(argv, "C")
    assert zh.returncode == en.returncode == 0, zh.stderr + en.stderr
    for english in ("# GPU capacity", "### Pools", "### Tenants", "### Advice"):
        assert chinese(english) in zh.stdout.splitlines() and english not in zh.stdout.splitlines()
        assert english in en.stdout.splitlines()
    assert "| h100 | H100-80GB | 4 / – | 32 / – | `nvidia.com/gpu` | 32 | – | 30 | 22 | 2 | 0.94 (≤ 1) |" in zh.stdout
    html = ["capacity", str(ORG), "--usage", str(WINDOW), "--format", "html"]
    page_zh, page_en = run(html, "zh_CN.UTF-8").stdout, run(html, "C").stdout
    assert '<html lang="zh-CN">' in page_zh and f"<h3>{chinese('Tenants')}</h3>" in page_zh
    assert '<html lang="en">' in page_en and "<h3>Tenants</h3>" in page_en


@pytest.fixture
def in_chinese() -> Iterator[None]:
    i18n.use("zh_CN")
    try:
        yield
    finally:
        i18n.use(i18n.ENGLISH)


def test_the_usage_table_and_markdown_are_chinese_and_the_table_lines_up(in_chinese: None, tmp_path: Path) -> None:
    from gpugov.app.pipeline import validate_repo
    from gpugov.i18n.width import width
    from gpugov.usage import formats
    from tests.unit.test_usage_display import book_of
    from tests.unit.test_usage_unit import ORG

    for rel, text in ORG.items():  # the usage org of test_usage_display
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    model = validate_repo(tmp_path).model
    assert model is not None
    book = book_of(model)
    table, markdown = formats.table(book), formats.markdown(book)
    assert chinese("per tenant:") in table.splitlines() and chinese("#### Per tenant") in markdown.splitlines()
    lines = table.splitlines()
    header = next(line for line in lines if line.startswith(chinese("tenant").upper()))
    first = lines[lines.index(header) + 1]
    # the second column starts in the same terminal cell on the header and the row (CJK is two cells wide)
    department = chinese("department")
    assert width(header[:header.index(department)]) == width(first[:first.index(first.split()[1])])
    assert "tenants' charges" not in table and "#### Per tenant" not in markdown
    i18n.use(i18n.ENGLISH)
    assert "per tenant:" in formats.table(book).splitlines()
