"""The tenant guide as markdown, in English or Simplified Chinese: the same facts, the same order, the
same YAML; only the words differ (one table of phrases per language, below)."""

from __future__ import annotations

from decimal import Decimal

import yaml

from gpugov.guide.facts import PoolInfo, QueueInfo, TenantFacts, sample_job
from gpugov.kube.names import KUEUE_PRIORITY_LABEL, KUEUE_QUEUE_LABEL, VOLCANO_QUEUE_ANNOTATION

LANGUAGES = ("en", "zh")

WORDS: dict[str, dict[str, str]] = {
    "en": {
        "title": "# GPU guide for tenant `{tenant}`",
        "intro": "Generated from the declarations by `gpugov guide {tenant}`: it changes when they do. Your tenant "
                 "is declared in `{file}`.",
        "who": "## Whom to ask",
        "owners": "- **Owners** of the tenant (they approve changes to `{file}`): {names}",
        "members": "- **Members** (may submit jobs): {names}",
        "platform": "- **Platform team** (quota, pools, priority classes; every change is a pull request they "
                    "review): {names}",
        "cost": "- Cost centre `{cost}`{department}",
        "department": ", department `{department}`",
        "nobody": "nobody declared",
        "queues": "## Your queues",
        "queues_intro": "A job goes through one of these queues; the queue decides when it starts.",
        "queue_head": "| cluster | namespace | queue | priority classes you may use |",
        "none_declared": "(none: the job's default priority)",
        "priorities": "## Priority classes",
        "priorities_intro": "A higher value is admitted first and may preempt lower, preemptible work.",
        "priority_head": "| class | value | preemptible | what it is for |",
        "yes": "yes", "no": "no",
        "pools": "## Pools and quotas",
        "pool_head": "| cluster | pool | accelerator | ask for | guaranteed | may borrow up to |",
        "unlimited": "no limit",
        "no_pools": "No pool holds a guaranteed accelerator quota of yours: ask the platform team.",
        "labels": "## The labels every job needs",
        "kueue_labels": (
            "On a Kueue cluster ({clusters}), put these on the **Job's** `metadata.labels` (not the pod's):\n\n"
            "- `{queue}: <queue>`: the queue, one of the table above for the Job's namespace. A job that asks for "
            "an accelerator without it is refused by the cluster's admission policy.\n"
            "- `{priority}: <class>` (optional): one of the queue's priority classes; any other is refused.\n"
            "- Ask for accelerators in `resources.requests` and `limits` of each container, by the resource "
            "name of the pool table. To pin a pool, add the pool's `nodeSelector` (as the samples do); "
            "without one, Kueue picks a pool where your quota fits.\n"
            "- Run several pods together as one indexed Job (`completionMode: Indexed`), a JobSet or a StatefulSet: a Pod you create may not "
            "join a plain pod group (`kueue.x-k8s.io/pod-group-name`), and no pod or template may name its node "
            "(`nodeName`); the scheduler places pods on the pool their queue admitted them to."
        ),
        "volcano_labels": (
            "On a Volcano cluster ({clusters}), each pod names the queue in its **annotations** and is "
            "scheduled by Volcano:\n\n"
            "- `{annotation}: <queue>` in the pod template's `metadata.annotations`, and "
            "`schedulerName: volcano` in its spec; a pod that asks for an accelerator without them is refused."
        ),
        "samples": "## A sample Job per pool",
        "sample_pool": "### Pool `{pool}` (cluster `{cluster}`): {resource}",
        "sample_run": "Save it as `{pool}.yaml`, then `kubectl create -f {pool}.yaml`.",
        "see": "## Seeing your queue",
        "see_body": (
            "- `gpugov queue --cluster {cluster} --tenant {tenant}`: your admitted and pending jobs, their "
            "position, why each waits and when it may start\n"
            "- `gpugov why {namespace}/{job} --cluster {cluster}`: one job, and what is ahead of it\n"
            "- `kubectl get workloads -n {namespace}`: Kueue's own view\n\n"
            "Both gpugov commands run in a checkout of the declarations repository, with your kubeconfig."
        ),
        "see_volcano": "On Volcano (`{cluster}`): `kubectl get podgroups -n {namespace}` shows your jobs' PodGroups and "
                       "their phase, `kubectl get queue {queue} -o yaml` your queue's allocated and deserved resources.",
    },
    "zh": {
        "title": "# 租户 `{tenant}` 的 GPU 使用指南",
        "intro": "本指南由 `gpugov guide {tenant}` 根据声明生成，声明变化后随之更新。你的租户声明在 `{file}`。",
        "who": "## 找谁",
        "owners": "- 租户**负责人**（`{file}` 的改动由他们审批）：{names}",
        "members": "- **成员**（可以提交作业）：{names}",
        "platform": "- **平台团队**（配额、资源池、优先级；每次变更都是由他们评审的拉取请求）：{names}",
        "cost": "- 成本中心 `{cost}`{department}",
        "department": "，部门 `{department}`",
        "nobody": "未声明",
        "queues": "## 你的队列",
        "queues_intro": "作业通过下列队列之一提交，由队列决定何时开始运行。",
        "queue_head": "| 集群 | 命名空间 | 队列 | 可用的优先级 |",
        "none_declared": "（无：使用作业的默认优先级）",
        "priorities": "## 优先级",
        "priorities_intro": "数值越高越先被准入，并可抢占更低的、可被抢占的作业。",
        "priority_head": "| 优先级 | 数值 | 可被抢占 | 用途 |",
        "yes": "是", "no": "否",
        "pools": "## 资源池与配额",
        "pool_head": "| 集群 | 资源池 | 加速卡 | 申请的资源名 | 保障配额 | 最多可借用 |",
        "unlimited": "不限",
        "no_pools": "你在任何资源池都没有保障的加速卡配额，请联系平台团队。",
        "labels": "## 每个作业需要的标签",
        "kueue_labels": (
            "在 Kueue 集群（{clusters}）上，把下列标签写在 **Job 的** `metadata.labels` 上（不是 Pod 的）：\n\n"
            "- `{queue}: <队列>`：队列名，取上表中与 Job 命名空间对应的队列。申请加速卡却没有这个标签的作业会被集群的准入策略拒绝。\n"
            "- `{priority}: <优先级>`（可选）：队列允许的优先级之一，其他优先级会被拒绝。\n"
            "- 在每个容器的 `resources.requests` 和 `limits` 中按资源池表里的资源名申请加速卡。要指定资源池，"
            "像示例那样加上该资源池的 `nodeSelector`；不指定时，Kueue 会选一个配额够用的资源池。\n"
            "- 多个 Pod 一起运行时，请用一个索引式 Job（`completionMode: Indexed`）、JobSet 或 StatefulSet：你创建的 Pod 不得加入普通 Pod 组"
            "（`kueue.x-k8s.io/pod-group-name`），任何 Pod 或模板都不得指定节点（`nodeName`）；调度器会把 Pod 放到队列为其准入的资源池上。"
        ),
        "volcano_labels": (
            "在 Volcano 集群（{clusters}）上，每个 Pod 在 **annotations** 里写明队列，并由 Volcano 调度：\n\n"
            "- Pod 模板的 `metadata.annotations` 中写 `{annotation}: <队列>`，spec 中写 `schedulerName: volcano`；"
            "申请加速卡却缺少它们的 Pod 会被拒绝。"
        ),
        "samples": "## 每个资源池的示例 Job",
        "sample_pool": "### 资源池 `{pool}`（集群 `{cluster}`）：{resource}",
        "sample_run": "保存为 `{pool}.yaml`，然后执行 `kubectl create -f {pool}.yaml`。",
        "see": "## 查看你的队列",
        "see_body": (
            "- `gpugov queue --cluster {cluster} --tenant {tenant}`：已准入和等待中的作业、排队位置、每个作业等待的原因和预计开始时间\n"
            "- `gpugov why {namespace}/{job} --cluster {cluster}`：单个作业的情况，以及排在它前面的作业\n"
            "- `kubectl get workloads -n {namespace}`：Kueue 自己的视图\n\n"
            "两个 gpugov 命令都在声明仓库的检出目录中、使用你的 kubeconfig 运行。"
        ),
        "see_volcano": "在 Volcano 集群（`{cluster}`）上：`kubectl get podgroups -n {namespace}` 显示你的作业的 PodGroup "
                       "及其阶段，`kubectl get queue {queue} -o yaml` 显示你的队列已分配和应得的资源。",
    },
}


def _number(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _names(items: tuple[str, ...], w: dict[str, str]) -> str:
    return ", ".join(f"`{n}`" for n in items) if items else w["nobody"]


def _row(*cells: str) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render(facts: TenantFacts, lang: str = "en") -> str:
    w = WORDS[lang]
    t = facts.tenant
    name = t.name
    out = [w["title"].format(tenant=name), "", w["intro"].format(tenant=name, file=t.file), ""]
    out += _who(facts, w)
    out += _queues(facts.queues, facts, w)
    out += _priorities(facts, w)
    out += _pools(facts.pools, w)
    out += _labels(facts.queues, w)
    out += _samples(facts.pools, name, w)
    out += _see(facts, w)
    return "\n".join(out).rstrip("\n") + "\n"


def _who(facts: TenantFacts, w: dict[str, str]) -> list[str]:
    t = facts.tenant
    owners = tuple(dict.fromkeys((*t.owners.users, *t.owners.groups, *t.owners.reviewers)))
    lines = [w["who"], "", w["owners"].format(file=t.file, names=_names(owners, w))]
    members = (*t.members.users, *t.members.groups)
    if members:
        lines.append(w["members"].format(names=_names(members, w)))
    lines.append(w["platform"].format(names=_names(facts.platform_team, w)))
    if t.cost_center:
        department = w["department"].format(department=t.department) if t.department else ""
        lines.append(w["cost"].format(cost=t.cost_center, department=department))
    return [*lines, ""]


def _queues(queues: tuple[QueueInfo, ...], facts: TenantFacts, w: dict[str, str]) -> list[str]:
    lines = [w["queues"], "", w["queues_intro"], "", w["queue_head"], "|---|---|---|---|"]
    for q in queues:
        classes = ", ".join(f"`{c}`" for c in q.priority_classes) or w["none_declared"]
        lines.append(_row(q.cluster, f"`{q.namespace}`", f"`{q.name}`", classes))
    return [*lines, ""]


def _priorities(facts: TenantFacts, w: dict[str, str]) -> list[str]:
    used = {c for q in facts.queues for c in q.priority_classes}
    if not used:
        return []
    lines = [w["priorities"], "", w["priorities_intro"], "", w["priority_head"], "|---|---|---|---|"]
    for p in sorted((facts.priorities[c] for c in used), key=lambda p: (-p.value, p.name)):
        lines.append(_row(f"`{p.name}`", str(p.value), w["yes"] if p.preemptible else w["no"], p.description))
    return [*lines, ""]


def _pools(pools: tuple[PoolInfo, ...], w: dict[str, str]) -> list[str]:
    lines = [w["pools"], ""]
    if not pools:
        return [*lines, w["no_pools"], ""]
    lines += [w["pool_head"], "|---|---|---|---|---|---|"]
    for p in pools:
        borrow = w["unlimited"] if p.may_borrow is None else _number(p.may_borrow)
        lines.append(_row(p.cluster, f"`{p.pool}`", p.model, f"`{p.resource}`", _number(p.nominal), borrow))
    return [*lines, ""]


def _labels(queues: tuple[QueueInfo, ...], w: dict[str, str]) -> list[str]:
    lines = [w["labels"], ""]
    kueue = sorted({q.cluster for q in queues if q.backend == "kueue"})
    volcano = sorted({q.cluster for q in queues if q.backend == "volcano"})
    if kueue:
        lines += [w["kueue_labels"].format(clusters=", ".join(f"`{c}`" for c in kueue), queue=KUEUE_QUEUE_LABEL,
                                           priority=KUEUE_PRIORITY_LABEL), ""]
    if volcano:
        lines += [w["volcano_labels"].format(clusters=", ".join(f"`{c}`" for c in volcano),
                                             annotation=VOLCANO_QUEUE_ANNOTATION), ""]
    return lines


def sample_yaml(pool: PoolInfo, tenant: str) -> str:
    return yaml.safe_dump(sample_job(pool, tenant), sort_keys=False, default_flow_style=False, width=120)


def _samples(pools: tuple[PoolInfo, ...], tenant: str, w: dict[str, str]) -> list[str]:
    if not pools:
        return []
    lines = [w["samples"], ""]
    for p in pools:
        lines += [w["sample_pool"].format(pool=p.pool, cluster=p.cluster, resource=f"`{p.resource}`"), "",
                  "```yaml", sample_yaml(p, tenant).rstrip("\n"), "```", "", w["sample_run"].format(pool=p.pool), ""]
    return lines


def _see(facts: TenantFacts, w: dict[str, str]) -> list[str]:
    lines = [w["see"], ""]
    kueue = [p for p in facts.pools if p.backend == "kueue"]
    queue = kueue[0].queue if kueue else next((q for q in facts.queues if q.backend == "kueue"), None)
    if queue is not None:
        job = f"{facts.tenant.name}-{kueue[0].pool}-sample" if kueue else "JOB"
        lines += [w["see_body"].format(cluster=queue.cluster, tenant=facts.tenant.name, namespace=queue.namespace,
                                       job=job), ""]
    for q in (q for q in facts.queues if q.backend == "volcano"):
        lines += [w["see_volcano"].format(cluster=q.cluster, namespace=q.namespace, queue=q.name), ""]
    return lines
