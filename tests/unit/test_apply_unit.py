"""apply's pure parts: node taints merged (the list is atomic for SSA), Volcano queue order."""

from __future__ import annotations

from gpugov.cluster.apply import TAINTS_ANNOTATION, merged_taints, taint_annotation, without_taints

ADMIN = {"key": "maintenance", "value": "planned", "effect": "PreferNoSchedule"}
POOL = {"key": "gpugov.io/pool", "value": "h100", "effect": "NoSchedule"}


def test_declared_taints_join_the_others() -> None:
    assert merged_taints([ADMIN], "", [POOL]) == [ADMIN, POOL]
    assert merged_taints([ADMIN, POOL], "gpugov.io/pool=h100:NoSchedule", [POOL]) == [ADMIN, POOL]


def test_a_changed_value_replaces_gpugovs_taint() -> None:
    new = {**POOL, "value": "h100-sxm"}
    assert merged_taints([POOL, ADMIN], "gpugov.io/pool=h100:NoSchedule", [new]) == [ADMIN, new]


def test_a_taint_gpugov_no_longer_declares_is_removed_others_stay() -> None:
    assert merged_taints([ADMIN, POOL], "gpugov.io/pool=h100:NoSchedule", []) == [ADMIN]
    # without the record, a taint that is not gpugov's is never touched
    assert merged_taints([ADMIN, POOL], "", []) == [ADMIN, POOL]


def test_the_ssa_body_carries_labels_and_the_record_not_the_taints() -> None:
    patch = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "b"}},
             "spec": {"taints": [POOL]}}
    body = without_taints(patch)
    assert "spec" not in body and body["metadata"]["labels"] == {"a": "b"}
    assert body["metadata"]["annotations"][TAINTS_ANNOTATION] == taint_annotation(patch) == "gpugov.io/pool=h100:NoSchedule"
    assert "annotations" not in patch["metadata"]  # the compiled object is left as it was


# -- Volcano queue order --------------------------------------------------------------------

from gpugov.cluster.apply import queue_apply_plan  # noqa: E402
from gpugov.kube.quantity import parse_quantity  # noqa: E402


def queue(name: str, gpus: int, parent: str | None = None, guarantee: int | None = None) -> dict:
    spec: dict = {"deserved": {"nvidia.com/gpu": str(gpus)}}
    if parent:
        spec["parent"] = parent
    if guarantee is not None:
        spec["guarantee"] = {"resource": {"nvidia.com/gpu": str(guarantee)}}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def webhook_accepts(state: dict[str, dict], body: dict) -> bool:
    """Volcano's hierarchy rule (reference kueue-volcano.md, queue webhook): a parent exists
    before its children, and the children's deserved add up to no more than their parent's."""
    after = {**state, body["metadata"]["name"]: body}
    for name, q in after.items():
        parent = q["spec"].get("parent")
        if parent and parent not in after:
            return False
        children = [c for c in after.values() if c["spec"].get("parent") == name]
        total = sum(parse_quantity(c["spec"]["deserved"]["nvidia.com/gpu"]) for c in children)
        if children and total > parse_quantity(q["spec"]["deserved"]["nvidia.com/gpu"]):
            return False
    return True


def run(plan: list[dict], live: dict[str, dict]) -> dict[str, dict]:
    state = dict(live)
    for body in plan:
        assert webhook_accepts(state, body), f"refused: {body['metadata']['name']} {body['spec']}"
        state[body["metadata"]["name"]] = body
    return state


def test_a_quota_decrease_shrinks_children_before_the_parent() -> None:
    live = {q["metadata"]["name"]: q for q in (queue("dept", 16), queue("a", 8, "dept"), queue("b", 8, "dept"))}
    desired = [queue("dept", 8), queue("a", 4, "dept"), queue("b", 4, "dept")]  # compile's order: parents first
    state = dict(live)
    assert not webhook_accepts(state, desired[0])  # what applying in compile's order would do
    final = run(queue_apply_plan(desired, live), live)
    assert {n: q["spec"]["deserved"]["nvidia.com/gpu"] for n, q in final.items()} == {"dept": "8", "a": "4", "b": "4"}


def test_an_increase_and_a_new_parent_go_parents_first() -> None:
    live = {q["metadata"]["name"]: q for q in (queue("dept", 8), queue("a", 8, "dept"))}
    desired = [queue("root-dept", 24), queue("dept", 16, "root-dept"), queue("a", 16, "dept"), queue("c", 8, "root-dept")]
    plan = queue_apply_plan(desired, live)
    assert plan[0]["metadata"]["name"] == "root-dept"
    final = run(plan, live)
    assert final["a"]["spec"]["deserved"]["nvidia.com/gpu"] == "16"
    assert final["dept"]["spec"]["deserved"]["nvidia.com/gpu"] == "16"


def test_widening_keeps_the_larger_value_and_drops_a_capability_only_one_side_has() -> None:
    from gpugov.cluster.apply import widened

    live = queue("dept", 16, guarantee=4)
    live["spec"]["capability"] = {"nvidia.com/gpu": "16"}
    desired = queue("dept", 8, guarantee=6)
    wide = widened(desired, live)
    assert wide["spec"]["deserved"] == {"nvidia.com/gpu": "16"}
    assert wide["spec"]["guarantee"] == {"resource": {"nvidia.com/gpu": "6"}}
    assert "capability" not in wide["spec"]  # no capability = no ceiling, the widest


# -- prune: what gpugov owns, in which order --------------------------------------------------

from gpugov.cluster.prune import _children_first, _prune_kinds, owned_by_gpugov, owned_metadata  # noqa: E402


def managed(manager: str, operation: str, labels: list[str], annotations: list[str] = ()) -> dict:
    meta: dict = {"f:labels": {f"f:{k}": {} for k in labels}}
    if annotations:
        meta["f:annotations"] = {f"f:{k}": {} for k in annotations}
    return {"manager": manager, "operation": operation, "fieldsV1": {"f:metadata": meta}}


def test_owned_means_gpugovs_label_and_its_field_manager() -> None:
    labelled = {"metadata": {"name": "x", "labels": {"app.kubernetes.io/managed-by": "gpugov"}}}
    assert not owned_by_gpugov(labelled)  # labelled by hand: no managedFields of gpugov's
    labelled["metadata"]["managedFields"] = [managed("kubectl", "Update", ["app.kubernetes.io/managed-by"])]
    assert not owned_by_gpugov(labelled)
    labelled["metadata"]["managedFields"].append(managed("gpugov", "Apply", ["app.kubernetes.io/managed-by"]))
    assert owned_by_gpugov(labelled)
    assert not owned_by_gpugov({"metadata": {"name": "x", "managedFields": [managed("gpugov", "Apply", [])]}})


def test_owned_metadata_reads_only_gpugovs_apply_entry() -> None:
    node = {"metadata": {"name": "n", "managedFields": [
        managed("gpugov", "Apply", ["gpugov.io/pool", "topology.gpugov.io/rack"], ["gpugov.io/taints"]),
        managed("gpugov", "Update", ["not-applied"]),  # the taint merge is an Update, not the label set
        managed("nvidia-gpu-feature-discovery", "Update", ["nvidia.com/gpu.product"]),
    ]}}
    assert owned_metadata(node) == ("gpugov.io/pool", "gpugov.io/taints", "topology.gpugov.io/rack")


def test_volcano_children_are_deleted_before_their_parents() -> None:
    queues = [queue("dept", 8), queue("root-dept", 24), queue("a", 4, "dept"), queue("b", 4, "dept")]
    queues[0]["spec"]["parent"] = "root-dept"
    order = [q["metadata"]["name"] for q in _children_first(queues)]
    assert order == ["a", "b", "dept", "root-dept"]


def test_prune_goes_in_reverse_apply_order_over_the_served_kinds() -> None:
    kinds = _prune_kinds({"v1", "kueue.x-k8s.io/v1beta2", "rbac.authorization.k8s.io/v1"})
    names = [k.kind for k in kinds]
    assert names[0] == "Node" and names[-1] == "Namespace"
    assert names.index("LocalQueue") < names.index("ClusterQueue") < names.index("Cohort") < names.index(
        "ResourceFlavor")
    assert "Queue" not in names and "ValidatingAdmissionPolicy" not in names  # not served: nothing to prune
    assert "Pod" not in names  # gpugov never writes pods


def test_a_write_of_the_servers_bookkeeping_alone_is_unchanged() -> None:
    """The API server rewrites gpugov's managedFields entry (new resourceVersion, same generation) on the
    first apply after the policy status controller applied status.typeChecking: nothing was configured,
    as the dry run says (tests/e2e/test_apply_dry_run.py sees it on the living sandbox)."""
    from gpugov.cluster.apply import change_of

    entry = {"manager": "gpugov", "operation": "Apply", "time": "2026-12-04T21:09:06Z"}
    status = {"manager": "validatingadmissionpolicy-status", "operation": "Apply", "subresource": "status"}
    live = {"kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p", "resourceVersion": "579", "generation": 1,
                                                              "managedFields": [entry, status]},
            "spec": {"failurePolicy": "Fail"}, "status": {"observedGeneration": 1}}
    rewritten = {**live, "metadata": {**live["metadata"], "resourceVersion": "624",
                                      "managedFields": [status, {**entry, "time": "2026-12-04T21:09:34Z"}]}}
    assert change_of("ValidatingAdmissionPolicy", live, live) == "unchanged"
    assert change_of("ValidatingAdmissionPolicy", live, rewritten) == "unchanged"
    relabelled = {**rewritten, "metadata": {**rewritten["metadata"], "labels": {"team": "x"}}}
    assert change_of("ValidatingAdmissionPolicy", live, relabelled) == "configured"
    assert change_of("ValidatingAdmissionPolicy", live, {**rewritten, "spec": {"failurePolicy": "Ignore"}}) == "configured"
    assert change_of("Node", live, relabelled) == "labelled" and change_of("Node", None, live) == "created"


def test_the_probed_policies_and_bindings_are_written_after_the_others() -> None:
    """The API server enforces what its informers hold at a refresh, each informer in write order: with the
    policies apply's wait probes written last among the policies and last among the bindings, a refused
    probe means every policy and binding written before is in force too."""
    from gpugov.app.pipeline import validate_repo
    from gpugov.cluster.enforcement import PROBED, probed_last
    from gpugov.compile import compile
    from tests.helpers.repos import REPO

    model = validate_repo(REPO).model
    assert model is not None
    objects = compile(model, backend="kueue", cluster="east")
    ordered = probed_last(objects)
    assert sorted(map(id, ordered)) == sorted(map(id, objects))
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        names = [o["metadata"]["name"] for o in ordered if o["kind"] == kind]
        probed = [n for n in names if n in PROBED]
        assert len(probed) == 2 and names[-2:] == probed, names
    places = [i for i, o in enumerate(objects) if o["kind"].startswith("ValidatingAdmissionPolicy")]
    assert [i for i, o in enumerate(ordered) if o["kind"].startswith("ValidatingAdmissionPolicy")] == places
    assert [o for o in ordered if not o["kind"].startswith("ValidatingAdmissionPolicy")] == [
        o for o in objects if not o["kind"].startswith("ValidatingAdmissionPolicy")]
