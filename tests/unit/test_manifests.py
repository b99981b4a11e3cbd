"""render's YAML writer: what it writes loads back to exactly what compile produced, it is
byte-identical to the PyYAML output render used to write (bar the deliberate Go-safety
quoting), and it is deterministic."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpugov.app.desired import desired_state
from gpugov.app.pipeline import validate_repo
from gpugov.compile import BACKENDS
from gpugov.manifests import HEADER, MARKER, NODE_NOTE, dump_objects, manifest_files
from gpugov.manifests.emit import BlockEmitter, dump_all, go_reads_as_non_string
from tests.helpers.repos import REPO

Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Strings YAML readers like to turn into something else, and strings that need care to write.
NASTY = [
    "yes", "No", "YES", "on", "Off", "y", "Y", "n", "N", "true", "False", "~", "null", "Null", "",
    "0x1F", "0X1F", "0o17", "0O17", "0b101", "0B101", "1e3", "1E3", "1e+3", "-1.5e-3", "012", "08", "0",
    "-0", "+1", "1_000", "1__", ".5", "-.5", "5.", ".inf", "-.Inf", ".NaN", "1:20", "190:20:30.15",
    "2001-12-14", "2001-12-14 1:2:3", "2001-12-14t21:59:43.10-05:00", "2001-1-2", "<<", "=",
    " a", "a ", "  ", " ", "- x", "-", "-a", "a: b", "a:", "a:b", ":a", "a #b", "a#b", "#", "@x", "`x",
    "%x", "!x", "&x", "*x", "|", ">", "{", "}", "[", "]", ",", "?", "? a", "?a", "'", '"', "\\", "it's",
    "''", "---", "...", "--- x", "\t", "a\tb", "\n", "\n\n", "a\n", "a\n\n", "\na", " \na", "a\nb",
    "a \nb", "a\n b", "a\n\n\nb\n", "\r", "a\r\nb", "\u2028", "a\u2028b", "\u2029", "\x85", "\x00",
    "\x07", "\x1b", "\x7f", "\ufeff", "\ufffe", "\xa0", "é", "ключ", "中文", "😀", "a😀b", "k: 😀",
    "x" * 130, "é" * 70, " ".join(["word"] * 40), "'q' " * 40, "a  " * 50 + "b", '"x" \\ ' * 30,
]

NUMBERLIKE_GO = [
    "y", "Y", "n", "N", "1e3", "1E3", "-1.5e-3", "0o17", "-0o17", "0O17", "0b101", "-0b1", "0B101",
    "0X1F", "08", "09", "1__", "1_0e3", "-_1", ".5", ".5e3", "-.5", "2001-12-14 1:2:3", "2001-1-2",
    "2001-12-14T21:59:43Z", "0x_1F",
]
ORDINARY = [
    "team-0", "nvidia.com/gpu", "640Gi", "73142m", "1g.10gb", "v1", "0.5.1", "1:60", "_1", "0x", "0b",
    "1e", "e3", ".e3", "._5", "-abc", "Infinity", "-inf", "2001-12", "yEs", "1,000", "1 2",
    "CC-T0", "kueue.x-k8s.io/queue-name",
]


def strict_equal(a: Any, b: Any) -> bool:
    """== that also tells True from 1 and False from 0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def load(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=Loader))


class ReferenceDumper(yaml.CSafeDumper):  # type: ignore[misc,name-defined]
    """PyYAML as render used it (literal blocks, no aliases, width 120), plus the styles the
    writer forces for Go safety: quoted where Go reads a non-string, escaped line separators."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = None
    if any(ch in value for ch in "\x85\u2028\u2029"):
        style = '"'
    elif "\n" in value:
        style = "|"
    elif go_reads_as_non_string(value):
        style = "'"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


ReferenceDumper.add_representer(str, _represent_str)


def reference(documents: list[Any], explicit_start: bool = True) -> str:
    return yaml.dump_all(documents, Dumper=ReferenceDumper, sort_keys=False, default_flow_style=False,
                         explicit_start=explicit_start, width=120, allow_unicode=True)


# -- strategies -------------------------------------------------------------------------

words = st.sampled_from(["a", "bb", "ccc", "it's", "", "\"q\"", "x\\y", "é", "#", ":", "-", "'", "y", "1e3"])
strings = st.one_of(
    st.sampled_from(NASTY),
    st.text(max_size=12),
    st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=4)), max_size=5).map("".join),
    st.lists(words, min_size=15, max_size=70).map(" ".join),  # long enough to fold
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-3, 3), strings)
trees = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(strings, children, max_size=4),
    max_leaves=25,
)
documents = st.lists(st.dictionaries(strings, trees, max_size=5) | st.lists(trees, max_size=3), max_size=3)


def ints_for_bools(value: Any) -> Any:
    if type(value) is bool:
        return int(value)
    if isinstance(value, dict):
        return {k: ints_for_bools(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints_for_bools(v) for v in value]
    return value


@st.composite
def repeating_documents(draw: st.DrawFn) -> list[Any]:
    """Equal subtrees at several depths, and their twins with 1/0 for True/False, which
    compare equal in Python: the writer's memo must still tell them apart."""
    tree = draw(st.dictionaries(strings, trees, min_size=1, max_size=4) | st.lists(trees, min_size=1, max_size=3))
    twin = ints_for_bools(tree)
    return [{"a": tree, "b": [tree, {"c": twin}], "d": [[tree]]}, {"e": twin, "f": tree}]


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- properties -------------------------------------------------------------------------


@SETTINGS
@given(documents)
def test_random_trees_load_back_exactly_and_match_pyyaml(docs: list[Any]) -> None:
    text = dump_all(docs)
    assert strict_equal(load(text), docs)
    assert text == reference(docs)


@SETTINGS
@given(repeating_documents())
def test_repeated_subtrees_are_written_like_any_other(docs: list[Any]) -> None:
    text = dump_all(docs)
    assert strict_equal(load(text), docs)
    assert text == reference(docs)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(strings, trees, max_size=5))
def test_a_document_without_start_marker_matches_pyyaml(doc: dict[str, Any]) -> None:
    text = BlockEmitter().documents([doc], explicit_start=False)
    assert text == reference([doc], explicit_start=False)
    assert strict_equal(load(text), [doc])


@pytest.mark.parametrize("value", NASTY)
def test_each_nasty_string_survives_as_key_value_and_item(value: str) -> None:
    docs = [{value: value, "list": [value, {value: [value]}], "nested": {"k": value}}]
    text = dump_all(docs)
    assert strict_equal(load(text), docs)
    assert text == reference(docs)


@pytest.mark.parametrize("value", NUMBERLIKE_GO)
def test_strings_go_reads_as_non_strings_are_quoted(value: str) -> None:
    assert go_reads_as_non_string(value)
    line = dump_all([{"k": value}]).splitlines()[1]
    assert line in (f"k: '{value}'", f'k: "{value}"'), line


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_strings_stay_plain(value: str) -> None:
    assert not go_reads_as_non_string(value)
    assert dump_all([{"k": value}]) == f"---\nk: {value}\n"


def test_layout_is_the_reviewable_block_style() -> None:
    text = dump_all([{"a": {"b": [1, {"c": True, "d": None}], "e": {}, "f": []}, "g": "x\ny\n"}])
    assert text == "---\na:\n  b:\n  - 1\n  - c: true\n    d: null\n  e: {}\n  f: []\ng: |\n  x\n  y\n"
    assert "&" not in dump_all([{"a": (shared := {"x": 1}), "b": shared}])  # no anchors or aliases


def test_long_scalars_fold_at_column_120_and_read_back() -> None:
    value = " ".join(f"w{i}" for i in range(80))
    text = dump_all([{"expression": value}])
    assert max(len(line) for line in text.splitlines()) <= 125
    assert len(text.splitlines()) > 3
    assert load(text) == [{"expression": value}]


@pytest.mark.parametrize("bad", [Decimal("1.5"), 1.5, (1, 2), {1, 2}, b"x", object()])
def test_values_outside_plain_data_are_refused_by_name(bad: object) -> None:
    with pytest.raises(TypeError, match=type(bad).__name__):
        dump_all([{"k": bad}])
    with pytest.raises(TypeError, match=type(bad).__name__):
        dump_all([{"k": [bad]}])


def test_non_string_keys_and_scalar_documents_are_refused() -> None:
    with pytest.raises(TypeError, match="keys must be strings"):
        dump_all([{1: "x"}])
    with pytest.raises(TypeError, match="document"):
        dump_all(["x"])


# -- what render writes for the example organisation ------------------------------------


def example_states() -> list[tuple[str, str]]:
    result = validate_repo(REPO)
    assert result.model is not None and not result.errors
    return [(cluster, backend) for cluster in result.model.cluster_names() for backend in BACKENDS]


@pytest.mark.parametrize(("cluster", "backend"), example_states())
def test_example_org_renders_load_back_to_compiles_objects(cluster: str, backend: str) -> None:
    objects = desired_state(REPO, cluster=cluster, backend=backend).objects
    stream = dump_objects(objects)
    assert strict_equal(load(stream), objects)
    # The same bytes PyYAML wrote before, so committed rendered trees do not churn.
    assert stream == reference(objects)
    files = manifest_files(objects)
    rendered = 0
    for rel, text in files.items():
        assert text.startswith(HEADER + (NODE_NOTE if rel.startswith("nodes/") else ""))
        if rel == MARKER:
            continue
        docs = load(text)
        kind = docs[0]["kind"]
        assert strict_equal(docs, [o for o in objects if o["kind"] == kind]), rel
        rendered += len(docs)
    assert rendered == len(objects)
    kustomization = load(files[MARKER])[0]
    assert kustomization["resources"] == sorted(rel for rel in files if rel != MARKER and "/" not in rel)


def test_rendering_is_deterministic_and_independent_of_what_was_written_before() -> None:
    objects = desired_state(REPO, cluster="east", backend="kueue").objects
    other = desired_state(REPO, cluster="west", backend="volcano").objects
    fresh = dump_objects(objects)
    assert dump_objects(objects) == fresh
    warm = BlockEmitter()
    warm.documents(other)
    warm.documents(objects)
    assert warm.documents(objects) == fresh  # memo and caches change speed, never bytes
    assert manifest_files(objects) == manifest_files(desired_state(REPO, cluster="east", backend="kueue").objects)


def test_an_object_changed_between_two_calls_is_written_as_it_is_now() -> None:
    """The writer finds a subtree met again as the same object without reading it (compile shares equal
    resource groups), within one call only: a caller may change its objects between calls."""
    groups = [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "a", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]
    queues = [{"kind": "ClusterQueue", "metadata": {"name": f"q{i}"}, "spec": {"resourceGroups": groups}}
              for i in range(200)]  # past the memo's warm-up at that place
    writer = BlockEmitter()
    before = writer.documents(queues)
    assert before == dump_all(queues) and before.count("nominalQuota: '8'") == 200
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "16"
    after = writer.documents(queues)
    assert after == dump_all(queues) and after.count("nominalQuota: '16'") == 200 and "'8'" not in after
    assert after == reference(queues)


def test_a_big_org_renders_the_same_bytes_as_pyyaml(tmp_path: Path) -> None:
    """Past the memo's warm-up (thousands of objects, repeated resource groups)."""
    from bench.synthetic import generate

    root = generate(tmp_path, 200, 20, 400)
    state = desired_state(root)
    stream = dump_objects(state.objects)
    assert stream == reference(state.objects)
    assert strict_equal(load(stream), state.objects)
