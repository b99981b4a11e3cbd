"""plan's shortcuts (issue #42) give what the long road gives: a revision's load reuses another's parse of the
same text, and reach changes are computed only for the (flavor, resource) pairs a quota change can move."""

from __future__ import annotations

import copy
import random

from gpugov.app.revision import read_revision
from gpugov.declarations.loader import load_files, tree_files
from gpugov.kube.objects import Object
from gpugov.kube.resources import is_accelerator
from gpugov.plan.differ import ReachChange, reach_changes
from gpugov.reach import tenant_rooms
from tests.helpers.repos import BASE


def test_a_load_reusing_another_gives_the_same_documents_and_locations() -> None:
    files = tree_files(BASE)
    first = load_files(files)
    again = load_files(files, first.parsed)
    assert [(d.file, d.index, d.data) for d in again.documents] == [(d.file, d.index, d.data) for d in first.documents]
    for old, new in zip(first.documents, again.documents, strict=True):
        assert new.node is old.node  # the composed tree is shared ...
        assert new.data is not old.data  # ... the plain data is not: whatever changes it changes one revision
        assert new.locate(("spec",)) == old.locate(("spec",))
    assert again.parsed.keys() == first.parsed.keys()


def test_a_changed_file_is_parsed_again() -> None:
    files = tree_files(BASE)
    first = load_files(files)
    rel = files[0].rel
    stale = {**first.parsed, rel: (first.parsed[rel][0] + "\n# edited\n", first.parsed[rel][1])}
    again = load_files(files, stale)
    assert [d.node for d in again.documents if d.file == rel] != [d.node for d in first.documents if d.file == rel]


def _every_room(cluster: str, base: list[Object], head: list[Object]) -> list[ReachChange]:
    """reach_changes the long way: every Room of every queue on both sides."""
    before, after = tenant_rooms(base), tenant_rooms(head)
    changes = []
    for tenant in sorted(set(before) | set(after)):
        old, new = before.get(tenant, {}), after.get(tenant, {})
        for pool, resource in sorted(set(old) | set(new)):
            if not is_accelerator(resource):
                continue
            was, now = old.get((pool, resource)), new.get((pool, resource))
            most_before = None if was is None else was.maximum
            most_after = None if now is None else now.maximum
            if most_before != most_after and (most_before or most_after):
                changes.append(ReachChange(cluster, tenant, pool, resource, most_before, most_after))
    return changes


def test_reach_changes_match_every_room_compared() -> None:
    revision = read_revision(BASE)
    compared = 0
    for cluster, objects in revision.compiled.items():
        quota_objects = [i for i, o in enumerate(objects) if o["kind"] in ("ClusterQueue", "Cohort")]
        if not quota_objects:
            continue
        rnd = random.Random(42)
        for _ in range(40):
            head = copy.deepcopy(objects)
            changed = head[rnd.choice(quota_objects)]
            groups = changed["spec"].get("resourceGroups") or []
            mode = rnd.choice(["quota", "quota", "quota", "cohort", "drop"])
            if mode == "quota" and groups:
                resource = rnd.choice(rnd.choice(groups[0]["flavors"])["resources"])
                field = rnd.choice(["nominalQuota", "borrowingLimit", "lendingLimit"])
                resource[field] = rnd.choice([0, 1, 3, 100, "5"])
            elif mode == "cohort":
                key = "cohortName" if changed["kind"] == "ClusterQueue" else "parentName"
                cohorts = [o["metadata"]["name"] for o in head if o["kind"] == "Cohort"]
                changed["spec"][key] = rnd.choice(["", "elsewhere", *cohorts])
            else:
                head.remove(changed)
            fast = reach_changes(cluster, objects, head)
            assert fast == _every_room(cluster, objects, head), mode
            compared += len(fast)
    assert compared > 0  # the mutations moved something


def test_no_change_no_reach() -> None:
    revision = read_revision(BASE)
    for cluster, objects in revision.compiled.items():
        assert reach_changes(cluster, objects, copy.deepcopy(objects)) == []
