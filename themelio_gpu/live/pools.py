"""The node pools' nodes against the pool contract: the labels and taints every GPU workload steers by, and,
for a static pool, exactly the nodes it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.scheduling import selector_mismatches
from themelio_gpu.live.api import NODES, Api
from themelio_gpu.live.report import Report
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.words import count


def _taint_key(taint: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(taint.get("key", "")), str(taint.get("value") or ""), str(taint.get("effect", "")))


def node_contract_problems(node: Mapping[str, Any], pool: PoolContract) -> list[str]:
    """What the node lacks of the pool's label and taint contract; extra labels and taints are fine."""
    labels: Mapping[str, str] = (node.get("metadata") or {}).get("labels") or {}
    # Reported in the contract's order; selector_mismatches decides which labels fail.
    mismatched = set(selector_mismatches(pool.labels, labels))
    missing = [f"{k}={v}" for k, v in pool.labels.items() if k in mismatched and k not in labels]
    different = [
        f"{k}={labels[k]} (contract: {v})" for k, v in pool.labels.items() if k in mismatched and k in labels
    ]
    taints = {_taint_key(t) for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)}
    missing_taints = [str(t) for t in pool.taints if (t.key, t.value, t.effect) not in taints]
    problems = []
    if missing:
        problems.append(f"missing labels {', '.join(missing)}")
    if different:
        problems.append(f"different labels {', '.join(different)}")
    if missing_taints:
        problems.append(f"missing taints {', '.join(missing_taints)}")
    return problems


def check_pool(plan: ClusterPlan, pool: PoolContract, api: Api, report: Report) -> None:
    check = f"pool {pool.name}"
    definition = next(p for p in plan.definition.node_pools if p.name == pool.name)
    static = definition.provisioning.static
    labelled = {
        str(n["metadata"]["name"]): n
        for n in api.list_items(NODES, [("labelSelector", f"{pool.pool_label}={pool.name}")])
    }
    nodes: dict[str, Mapping[str, Any]] = {}
    failed = False
    if static is not None:
        for name in static.nodes:
            if name in labelled:
                nodes[name] = labelled[name]
                continue
            try:
                nodes[name] = api.get(f"{NODES}/{name}")
            except ApiException as error:
                if error.status != 404:
                    raise
                report.fail(check, f"node {name} (provisioning.static.nodes) does not exist")
                failed = True
        for name in sorted(set(labelled) - set(static.nodes)):
            report.warn(
                check, f"node {name} carries {pool.pool_label}={pool.name} but is not in provisioning.static.nodes"
            )
            nodes[name] = labelled[name]
    else:
        nodes = dict(labelled)
        if not nodes:
            kind = "karpenter" if definition.provisioning.karpenter is not None else "provisioned"
            report.warn(
                check,
                f"no node carries {pool.pool_label}={pool.name} yet ({kind} pool: nodes appear when they are created)",
            )
            return
    for name, node in sorted(nodes.items()):
        problems = node_contract_problems(node, pool)
        if problems:
            report.fail(check, f"node {name}: {'; '.join(problems)}")
            failed = True
    if not failed and nodes:
        report.ok(
            check, f"{count(len(nodes), 'node')} match the label and taint contract ({', '.join(sorted(nodes))})"
        )
