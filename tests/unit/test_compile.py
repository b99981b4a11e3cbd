"""compile: golden manifests, determinism, labels on every object, backend mappings."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from gpugov.app.pipeline import validate_repo
from gpugov.compile import APPLY_ORDER, compile, object_key
from gpugov.compile.common import ANNOTATION_SOURCE, MANAGED_BY
from gpugov.manifests import manifest_files
from tests.helpers.golden import assert_golden_tree
from tests.helpers.repos import GOLDEN, REPO, write

CASES = [("east", "kueue"), ("east", "volcano"), ("west", "kueue"), ("west", "volcano")]


@pytest.fixture(scope="module")
def model():
    result = validate_repo(REPO)
    assert result.model is not None and result.findings == []
    return result.model


@pytest.mark.parametrize(("cluster", "backend"), CASES)
def test_golden_manifests(model, cluster: str, backend: str) -> None:
    """Rendered files match tests/golden; GPUGOV_UPDATE_GOLDEN=1 rewrites them after a reviewed change."""
    files = manifest_files(compile(model, backend=backend, cluster=cluster))
    folder = GOLDEN / f"{cluster}-{backend}"
    assert_golden_tree(folder, files)


@pytest.mark.parametrize(("cluster", "backend"), CASES)
def test_compile_is_deterministic_and_ordered(model, cluster: str, backend: str) -> None:
    first, second = compile(model, backend=backend, cluster=cluster), compile(model, backend=backend, cluster=cluster)
    assert first == second
    assert manifest_files(first) == manifest_files(second)
    ranks = [APPLY_ORDER.index(o["kind"]) for o in first]
    assert ranks == sorted(ranks)
    assert len({object_key(o) for o in first}) == len(first)


@pytest.mark.parametrize(("cluster", "backend"), CASES)
def test_every_object_is_labelled_and_traceable(model, cluster: str, backend: str) -> None:
    owner_labels = {
        "gpugov.io/tenant",
        "gpugov.io/department",
        "gpugov.io/pool",
        "gpugov.io/priority-class",
        "gpugov.io/mig-config",
        "gpugov.io/component",
    }
    for obj in compile(model, backend=backend, cluster=cluster):
        meta = obj["metadata"]
        assert meta["labels"][MANAGED_BY] == "gpugov", obj["kind"]
        assert owner_labels & set(meta["labels"]), (obj["kind"], meta["name"])
        file, _, line = meta["annotations"][ANNOTATION_SOURCE].split(",")[0].rpartition(":")
        assert (REPO / file).is_file() and int(line) >= 1


def by_kind(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def test_kueue_cluster_queue_mapping(model) -> None:
    objects = compile(model, backend="kueue", cluster="east")
    queues = by_kind(objects, "ClusterQueue")
    nlp = queues["nlp"]["spec"]
    assert nlp["cohortName"] == "research"
    assert nlp["namespaceSelector"]["matchExpressions"][0]["values"] == ["nlp-dev", "nlp-train"]
    (group,) = nlp["resourceGroups"]
    assert group["coveredResources"][-2:] == ["cpu", "memory"]
    flavors = {f["name"]: {r["name"]: r for r in f["resources"]} for f in group["flavors"]}
    # own pool first with the declared limits; cohort pools listed with nominal 0 so it can borrow
    assert group["flavors"][0]["name"] == "h100"
    assert flavors["h100"]["nvidia.com/gpu"] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "16",
        "borrowingLimit": "16",
        "lendingLimit": "8",
    }
    assert flavors["a100-mig"]["nvidia.com/mig-1g.10gb"]["nominalQuota"] == "0"
    assert nlp["fairSharing"] == {"weight": "2"}
    # the inference team lends nothing and borrowers may only preempt preemptible work
    inference = queues["inference"]["spec"]
    assert inference["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority", "maxPriorityThreshold": 10000}
    cohorts = by_kind(objects, "Cohort")
    assert cohorts["research-vision"]["spec"]["parentName"] == "research"
    assert cohorts["research"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "4"
    flavor = by_kind(objects, "ResourceFlavor")["h100"]["spec"]
    assert flavor["topologyName"] == "h100" and flavor["nodeLabels"] == {"gpugov.io/pool": "h100"}
    assert flavor["tolerations"][0]["key"] == "gpugov.io/pool"
    local = [o for o in objects if o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == "nlp-train"]
    assert local[0]["spec"] == {"clusterQueue": "nlp"}


def test_cluster_queue_quotas_add_up_to_declarations(model) -> None:
    objects = compile(model, backend="kueue", cluster="east")
    for name, cq in by_kind(objects, "ClusterQueue").items():
        tenant = model.tenants[name]
        declared = {
            (q.pool, rq.resource): rq.nominal
            for q in tenant.quotas
            for rq in q.resources
            if q.pool in ("h100", "a100-mig")
        }
        compiled = {
            (f["name"], r["name"]): Decimal(r["nominalQuota"].rstrip("Ti"))
            for g in cq["spec"]["resourceGroups"]
            for f in g["flavors"]
            for r in f["resources"]
            if r["name"] not in ("cpu", "memory")
        }
        for key, nominal in declared.items():
            if key[1] not in ("cpu", "memory"):
                assert compiled[key] == nominal
        assert sum(v for k, v in compiled.items() if k not in declared) == 0


def test_volcano_queue_invariants(model) -> None:
    objects = compile(model, backend="volcano", cluster="east")
    queues = by_kind(objects, "Queue")
    children: dict[str, list[dict]] = {}
    for queue in queues.values():
        spec = queue["spec"]
        deserved = {k: Decimal(v.rstrip("Ti")) for k, v in spec.get("deserved", {}).items()}
        guarantee = {k: Decimal(v.rstrip("Ti")) for k, v in spec.get("guarantee", {}).get("resource", {}).items()}
        capability = {k: Decimal(v.rstrip("Ti")) for k, v in spec.get("capability", {}).items()}
        for resource, amount in guarantee.items():
            assert amount <= deserved[resource]
        for resource, amount in capability.items():
            assert deserved.get(resource, 0) <= amount
        if spec.get("parent", "root") != "root":  # root is Volcano's own queue, the whole cluster
            children.setdefault(spec["parent"], []).append(spec)
    for parent, kids in children.items():
        parent_deserved = queues[parent]["spec"].get("deserved", {})
        for resource in {r for k in kids for r in k.get("deserved", {})}:
            total = sum(Decimal(k["deserved"].get(resource, "0").rstrip("Ti")) for k in kids)
            assert total <= Decimal(parent_deserved[resource].rstrip("Ti"))
    assert queues["inference"]["spec"]["reclaimable"] is False
    assert queues["nlp"]["spec"]["reclaimable"] is True
    namespaces = by_kind(objects, "Namespace")
    assert namespaces["nlp-train"]["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "nlp"
    nodes = by_kind(objects, "Node")
    assert nodes["h100-01"]["metadata"]["labels"]["volcano.sh/nodegroup-name"] == "h100"


def test_nodes_and_mig_config(model) -> None:
    objects = compile(model, backend="kueue", cluster="east")
    nodes = by_kind(objects, "Node")
    assert nodes["a100-01"]["metadata"]["labels"]["nvidia.com/mig.config"] == "a100-mig-small"
    assert nodes["a100-04"]["metadata"]["labels"]["nvidia.com/mig.config"] == "all-disabled"
    assert "nvidia.com/mig.config" not in nodes["h100-01"]["metadata"]["labels"]
    assert nodes["h100-01"]["metadata"]["labels"]["topology.gpugov.io/rack"] == "r1"
    assert nodes["h100-01"]["spec"]["taints"] == [{"key": "gpugov.io/pool", "value": "h100", "effect": "NoSchedule"}]
    (configmap,) = [o for o in by_kind(objects, "ConfigMap").values() if "config.yaml" in o.get("data", {})]
    assert configmap["metadata"]["namespace"] == "gpu-operator"
    import yaml

    config = yaml.safe_load(configmap["data"]["config.yaml"])
    assert config["version"] == "v1"
    assert config["mig-configs"]["a100-mig-balanced"] == [
        {
            "devices": "all",
            "device-filter": ["0x20B210DE", "0x20B510DE"],  # A100-80GB only: 0x20F3, 0x20F5 are A800-80GB
            "mig-enabled": True,
            "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        }
    ]
    assert config["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]


def test_core_objects(model) -> None:
    objects = compile(model, backend="kueue", cluster="east")
    bindings = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "inference"]
    assert bindings[0]["roleRef"]["name"] == "gpugov-tenant-owner"  # gpugov's own role, never the built-in edit
    assert {s["name"] for s in bindings[0]["subjects"]} == {"dave@example.com", "serving-oncall"}
    # Kueue: no ResourceQuota (the admission policies and the ClusterQueue hold the ceiling);
    # Volcano keeps it as a backstop.
    assert not [o for o in objects if o["kind"] == "ResourceQuota"]
    volcano = compile(model, backend="volcano", cluster="east")
    quotas = [o for o in volcano if o["kind"] == "ResourceQuota" and o["metadata"]["namespace"] == "vision"]
    hard = quotas[0]["spec"]["hard"]
    # vision: 8 H100 + borrowingLimit 8, plus the 8 whole A100s of a100-mig, which its cohort
    # tree has quota in and it may borrow without limit; 3g.40gb: no limit, so the pool's 8
    assert hard["requests.nvidia.com/gpu"] == "24"
    assert hard["requests.nvidia.com/mig-3g.40gb"] == "8"
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    assert "llm-pretrain" not in names and "speech" in names  # tenants follow their pools' clusters



@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_tenant_namespaces_survive_a_pruning_gitops_sync(model, backend: str) -> None:
    # Removing a tenant from Git must not let Argo CD or Flux delete its namespace and workloads.
    objects = compile(model, backend=backend, cluster="east")
    namespaces = [o for o in objects if o["kind"] == "Namespace" and "gpugov.io/tenant" in o["metadata"]["labels"]]
    assert namespaces
    for ns in namespaces:
        annotations = ns["metadata"]["annotations"]
        assert annotations["argocd.argoproj.io/sync-options"] == "Prune=false", ns["metadata"]["name"]
        assert annotations["kustomize.toolkit.fluxcd.io/prune"] == "disabled", ns["metadata"]["name"]

def test_undeclared_cpu_memory_follow_the_accelerator_share(model) -> None:
    """Per pool, the tenants' own cpu/memory add up to at most the pool's, each in proportion
    to its accelerators; non-preemptible tenants never borrow; later pools before borrowing."""
    from gpugov.kube.quantity import parse_quantity

    queues = by_kind(compile(model, backend="kueue", cluster="east"), "ClusterQueue")
    totals: dict[tuple[str, str], Decimal] = {}
    for cq in queues.values():
        assert cq["spec"]["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor"}
        for flavor in cq["spec"]["resourceGroups"][0]["flavors"]:
            for resource in flavor["resources"]:
                if resource["name"] in ("cpu", "memory"):
                    key = (flavor["name"], resource["name"])
                    totals[key] = totals.get(key, Decimal(0)) + parse_quantity(resource["nominalQuota"])
    for (pool, resource), total in totals.items():
        assert total <= model.pools[pool].capacity[resource], (pool, resource, total)
    data_platform = {f["name"]: {r["name"]: r for r in f["resources"]}
                     for f in queues["data-platform"]["spec"]["resourceGroups"][0]["flavors"]}
    # 24 x 1g.10gb (1/7 GPU each) + 4 x 2g.20gb (2/7) = 32/7 of the pool's 32 GPUs, of 4 x 128 cores
    # and 4 x 1Ti, rounded down to millicores and Mi
    assert data_platform["a100-mig"]["cpu"]["nominalQuota"] == "73142m"
    assert data_platform["a100-mig"]["memory"]["nominalQuota"] == "599186Mi"
    inference = [r for f in queues["inference"]["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"]]
    assert inference and all(r.get("borrowingLimit") == "0" for r in inference)


# A Volcano cluster with a pool selected by labels (its node group named differently from the
# pool, so the test tells the two apart) and a pool of named nodes.
VOLCANO_SELECTOR_ORG = {
    "policies/clusters.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Cluster
metadata: {name: edge}
spec: {backend: volcano}
""",
    "hardware/edge.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: edge-h100}
spec:
  cluster: edge
  accelerator: {model: H100-80GB}
  acceleratorsPerNode: 8
  nodeResources: {cpu: 64, memory: 512Gi}
  nodeSelector:
    matchLabels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, volcano.sh/nodegroup-name: h100-rack-7}
  nodeCount: 2
---
apiVersion: gpugov.io/v1alpha1
kind: GPUPool
metadata: {name: edge-a100}
spec:
  cluster: edge
  accelerator: {model: A100-80GB}
  acceleratorsPerNode: 4
  nodeResources: {cpu: 64, memory: 512Gi}
  nodes: [{name: edge-a100-1}, {name: edge-a100-2}]
""",
    "tenants/teams.yaml": """\
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: selected}
spec:
  owners: {users: [s@example.com]}
  costCenter: CC-1
  namespaces: [selected]
  quotas: [{pool: edge-h100, resources: {accelerators: 8}}]
---
apiVersion: gpugov.io/v1alpha1
kind: Tenant
metadata: {name: named}
spec:
  owners: {users: [n@example.com]}
  costCenter: CC-2
  namespaces: [named]
  quotas: [{pool: edge-a100, resources: {accelerators: 4}}]
""",
}


def volcano_selector_model(root: Path):
    for rel, text in VOLCANO_SELECTOR_ORG.items():
        write(root, rel, text)
    result = validate_repo(root)
    assert result.model is not None and result.findings == [], result.findings
    return result.model


def test_volcano_queue_of_a_selector_pool_matches_the_nodes_it_selects(tmp_path: Path) -> None:
    """A Queue may run only on nodes whose volcano.sh/nodegroup-name is in its required node group
    affinity (Volcano's nodegroup plugin). For a selector pool those must be exactly the nodes its
    selector picks; for a pool of named nodes, the nodes gpugov's patches label."""
    model = volcano_selector_model(tmp_path)
    objects = compile(model, backend="volcano", cluster="edge")
    selector = dict(model.pools["edge-h100"].node_selector)
    patched = {o["metadata"]["name"]: o["metadata"]["labels"] for o in objects if o["kind"] == "Node"}
    # The cluster's nodes: two the selector picks (what the admin labelled), one H100 it does not,
    # and the named A100 nodes as gpugov's patches leave them.
    nodes = {
        "h100-1": dict(selector, **{"kubernetes.io/hostname": "h100-1"}),
        "h100-2": dict(selector),
        "h100-unlabelled": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        **patched,
    }
    assert set(patched) == {"edge-a100-1", "edge-a100-2"}  # no patch for nodes gpugov cannot name

    def usable_by(queue: str) -> set[str]:
        affinity = by_kind(objects, "Queue")[queue]["spec"]["affinity"]["nodeGroupAffinity"]
        groups = set(affinity["requiredDuringSchedulingIgnoredDuringExecution"])
        return {name for name, labels in nodes.items() if labels.get("volcano.sh/nodegroup-name") in groups}

    selected = {name for name, labels in nodes.items() if selector.items() <= labels.items()}
    assert selected == {"h100-1", "h100-2"}
    assert usable_by("selected") == selected
    assert usable_by("named") == {"edge-a100-1", "edge-a100-2"}


def test_volcano_selector_pool_without_node_group_is_refused(tmp_path: Path) -> None:
    """Without volcano.sh/nodegroup-name in its selector, no node would carry the group its Queue
    requires: validation says so instead of compiling a Queue that never schedules."""
    volcano_selector_model(tmp_path)
    text = VOLCANO_SELECTOR_ORG["hardware/edge.yaml"].replace(", volcano.sh/nodegroup-name: h100-rack-7", "")
    write(tmp_path, "hardware/edge.yaml", text)
    findings = validate_repo(tmp_path).findings
    assert [(f.rule, f.location.file, f.location.line) for f in findings if f.location] == [
        ("GG055", "hardware/edge.yaml", 10)
    ]
    assert "no node carries" in findings[0].message and "kubectl label nodes" in findings[0].hint
