"""Rendered YAML as the Go readers of kubectl, kustomize, Argo CD and Flux read it.

kubectl, the API server and Argo CD decode manifests with sigs.k8s.io/yaml (go-yaml v2
rules: y/n/on/off are bools, 0o17 and 1e3 are numbers); kustomize and Flux with go-yaml
v3. A tiny Go program built from the local Go module cache (no network) decodes what
render writes with each of them and prints JSON, which must equal compile's objects; and
`kubectl kustomize` (kustomize's own reader and writer) builds the rendered tree, whose
output go-yaml v3 must read as the same objects. Skips, saying why, where Go, those
modules or kubectl are not available.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpugov.app.desired import desired_state
from gpugov.manifests import MARKER, manifest_files, write_tree
from gpugov.manifests.emit import dump_all
from tests.helpers.repos import REPO
from tests.unit.test_manifests import NASTY, NUMBERLIKE_GO, ORDINARY, example_states, load, strings

READER = """// Reads a YAML stream on stdin and prints, per Go reader, its documents as JSON.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

func main() {
	data, _ := io.ReadAll(os.Stdin)
	out := map[string]interface{}{
		"sigs.k8s.io/yaml":   sigs(data),
		"go.yaml.in/yaml/v2": v2(data),
		"go.yaml.in/yaml/v3": v3(data),
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func fail(err error) interface{} { return map[string]string{"error": err.Error()} }

// Split on '---' lines as kubectl's YAML reader does, then YAMLToJSON each document.
func sigs(data []byte) interface{} {
	var chunks [][]byte
	var current bytes.Buffer
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 1<<20), 1<<30)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.TrimRight(line, " \\t") == "---" {
			chunks = append(chunks, append([]byte(nil), current.Bytes()...))
			current.Reset()
			continue
		}
		current.WriteString(line + "\\n")
	}
	chunks = append(chunks, current.Bytes())
	docs := []interface{}{}
	for _, chunk := range chunks {
		j, err := sigsyaml.YAMLToJSON(chunk)
		if err != nil {
			return fail(err)
		}
		if string(j) != "null" {
			docs = append(docs, json.RawMessage(j))
		}
	}
	return docs
}

func v2(data []byte) interface{} {
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	docs := []interface{}{}
	for {
		var doc interface{}
		err := dec.Decode(&doc)
		if err == io.EOF {
			return docs
		}
		if err != nil {
			return fail(err)
		}
		docs = append(docs, stringKeys(doc))
	}
}

func stringKeys(v interface{}) interface{} {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		m := map[string]interface{}{}
		for k, val := range t {
			s, ok := k.(string)
			if !ok {
				return map[string]string{"non-string key": fmt.Sprintf("%T %v", k, k)}
			}
			m[s] = stringKeys(val)
		}
		return m
	case []interface{}:
		for i := range t {
			t[i] = stringKeys(t[i])
		}
		return t
	default:
		return v
	}
}

func v3(data []byte) interface{} {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	docs := []interface{}{}
	for {
		var doc interface{}
		err := dec.Decode(&doc)
		if err == io.EOF {
			return docs
		}
		if err != nil {
			return fail(err)
		}
		docs = append(docs, doc)
	}
}
"""

GO_MOD = """module gpugov.test/yamlreaders

go 1.24

require (
	go.yaml.in/yaml/v2 v2.4.2
	go.yaml.in/yaml/v3 v3.0.3
	sigs.k8s.io/yaml v1.6.0
)

// Only a test dependency of go-yaml, absent from module caches filled by builds.
replace gopkg.in/check.v1 => ./check
"""


@pytest.fixture(scope="module")
def go_reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed; the Go YAML readers cannot be built")
    src = tmp_path_factory.mktemp("goyaml")
    (src / "main.go").write_text(READER)
    (src / "go.mod").write_text(GO_MOD)
    (src / "check").mkdir()
    (src / "check" / "go.mod").write_text("module gopkg.in/check.v1\n")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOSUMDB": "off", "GOTOOLCHAIN": "local",
           "GOWORK": "off"}
    built = subprocess.run([go, "build", "-o", "reader", "."], cwd=src, env=env, capture_output=True, text=True,
                           timeout=600, check=False)
    if built.returncode != 0:
        pytest.skip(f"the Go YAML modules are not in the local module cache: {built.stderr.strip()[-300:]}")
    return src / "reader"


def go_read(reader: Path, text: str) -> dict[str, Any]:
    done = subprocess.run([str(reader)], input=text.encode("utf-8"), capture_output=True, timeout=120, check=True)
    return dict(json.loads(done.stdout))


def canonical(value: Any) -> str:
    """JSON with sorted keys: tells "1" from 1 and true from 1, ignores Go's map order."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def assert_go_reads(reader: Path, text: str, expected: list[Any]) -> None:
    for name, docs in go_read(reader, text).items():
        assert canonical(docs) == canonical(expected), name


@pytest.mark.parametrize(("cluster", "backend"), example_states())
def test_go_readers_read_the_rendered_example_org_as_compiled(go_reader: Path, cluster: str, backend: str) -> None:
    objects = desired_state(REPO, cluster=cluster, backend=backend).objects
    for rel, text in manifest_files(objects).items():
        if rel == MARKER:
            continue
        kind = load(text)[0]["kind"]
        assert_go_reads(go_reader, text, [o for o in objects if o["kind"] == kind])


def number_like() -> list[str]:
    """Every spelling Go's strconv or YAML 1.1/1.2 might take for a number, and near misses."""
    bodies = ["0", "1", "7", "08", "012", "1_000", "1__", "_1", "0x1F", "0X1f", "0x", "0o17", "0O17", "0o",
              "0b101", "0B1", "0b", "1e3", "1E3", "1e+3", "1e-3", "1.5", ".5", "5.", "1_0.5", "1.5e-3", "1.e3",
              ".e3", "1e", "e3", "1:20", "1:60", "190:20:30.15", ".inf", ".Inf", ".NaN", "inf", "nan", "0x1p-2",
              "1ee3", "12e", "0.1.2", "00", "09", "0_7"]
    dates = ["2001-12-14", "2001-1-2", "2001-12-14t21:59:43.10-05:00", "2001-12-14T21:59:43Z",
             "2001-12-14 21:59:43.10", "2001-12-14 1:2:3", "2001-12-14 21:59:43.10 -5", "2001-12", "2001-12-14x"]
    return [sign + body for sign, body in itertools.product(["", "+", "-"], bodies)] + dates


def test_go_readers_keep_every_string_a_string(go_reader: Path) -> None:
    values = sorted({*NASTY, *NUMBERLIKE_GO, *ORDINARY, *number_like()})
    docs = [
        {"data": {f"k{i}": value for i, value in enumerate(values)}},
        {"keys": {value: i for i, value in enumerate(values)}},
        {"items": values},
    ]
    assert_go_reads(go_reader, dump_all(docs), docs)


int64s = st.integers(-(2**63), 2**63 - 1)
go_trees = st.recursive(
    st.one_of(st.none(), st.booleans(), int64s, strings),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(strings, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(strings, go_trees, min_size=1, max_size=5), min_size=1, max_size=3))
def test_go_readers_read_random_trees_exactly(go_reader: Path, docs: list[dict[str, Any]]) -> None:
    assert_go_reads(go_reader, dump_all(docs), docs)


# kustomize round-trips objects through JSON and then refuses its own raw DEL, C1 controls
# and U+FFFE/U+FFFF ("control characters are not allowed"), however the input spelled them;
# and it drops a '<<' key even quoted, taking it for a merge.
KUSTOMIZE_CANNOT_CARRY = re.compile("[\x7f-\x9f\ufffe\uffff]")
KUSTOMIZE_DROPS_KEY = "<<"


def kustomize_command() -> list[str]:
    """Kustomize as Argo CD and Flux run it: the binary `make test` installs with Go, or kubectl's own."""
    built = REPO / "tools" / "bin" / "kustomize"
    if built.is_file():
        return [str(built), "build"]
    if kubectl := shutil.which("kubectl"):
        return [kubectl, "kustomize"]
    if os.environ.get("GPUGOV_REQUIRE_E2E") == "1":
        pytest.fail("kustomize is missing: make test installs it with Go")
    pytest.skip("neither tools/bin/kustomize (make test builds it with Go) nor kubectl is installed")


def kustomize_build(tree: Path) -> str:
    done = subprocess.run([*kustomize_command(), str(tree)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def by_identity(objects: list[Any]) -> list[str]:
    return sorted(canonical(o) for o in objects)


@pytest.mark.parametrize(("cluster", "backend"), example_states())
def test_kustomize_builds_the_rendered_example_org_into_compiles_objects(
    go_reader: Path, tmp_path: Path, cluster: str, backend: str
) -> None:
    objects = desired_state(REPO, cluster=cluster, backend=backend).objects
    write_tree(tmp_path / "out", manifest_files(objects))
    built = go_read(go_reader, kustomize_build(tmp_path / "out"))["go.yaml.in/yaml/v3"]
    assert by_identity(built) == by_identity([o for o in objects if o["kind"] != "Node"])


def test_kustomize_keeps_every_string_a_string(go_reader: Path, tmp_path: Path) -> None:
    values = sorted(v for v in {*NASTY, *NUMBERLIKE_GO, *ORDINARY, *number_like()}
                    if not KUSTOMIZE_CANNOT_CARRY.search(v))
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "strings", "namespace": "x"},
              "data": {f"k{i}": value for i, value in enumerate(values)}}
    sample = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"},
              "spec": {"keys": {value: i for i, value in enumerate(values) if value != KUSTOMIZE_DROPS_KEY},
                       "items": values}}
    write_tree(tmp_path / "out", manifest_files([sample, config]))
    built = go_read(go_reader, kustomize_build(tmp_path / "out"))["go.yaml.in/yaml/v3"]
    assert by_identity(built) == by_identity([sample, config])
