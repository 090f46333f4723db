"""verify's prediction for a sandbox: on which of the sandbox's GPU nodes each DaemonSet runs, as `verify` proves it.

The charts are the ones the sandbox installed (its chart repository's archives, or a local chart folder's), each
rendered as `verify` renders it (`render.py`: the stack's values, the cluster's Kubernetes version); the proof
is `verify`'s own (`proof.py`: each pool's nodes modelled from its contract and settled with the labels NFD and
the operator add, each DaemonSet placed there). Each sandbox node gets the verdict of its counterpart in the
model: a static node is itself; a provisioned pool's nodes are alike, as verify's one node of it; a Karpenter
node (the one the probe had Karpenter launch, recorded as the pool's) is the model's node of the pool's first
instance and capacity type.

NFD's worker runs nothing in the sandbox: where its pod is placed, the sandbox writes the labels it would
(`nodes.NFD_GPU_NODE`, components/nfd_worker.py), so a node has them where verify's settles NFD's. Where the
sandbox runs NVIDIA's GPU Operator controller (its state says so), the controller sets its own labels
(`nvidia.com/gpu.present`, the `nvidia.com/gpu.deploy.*` state labels), but not `nvidia.com/gpu.deploy.mig-manager`,
which it adds only where GPU Feature Discovery's container, which does not run here, found a MIG-capable GPU.
Where verify's verdict on a node rests on a runtime label the sandbox does not give it
(the verdict on the model's node without its runtime labels, the sandbox's differs), the prediction says which
labels, and the probe shows that DaemonSet without comparing it.
`sandbox probe` compares these with the nodes the real DaemonSet controller chose (`sandbox/daemonsets.py`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from themelio_gpu.k8s.nvidia import DEPLOY, DEPLOY_MIG_MANAGER, DRIVER_OWNER, GPU_PRESENT
from themelio_gpu.k8s.scheduling import Node
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.daemonsets import Predicted, gpu_nodes, installed_charts
from themelio_gpu.sandbox.nodes import NFD_GPU_NODE
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.verify.proof import PoolProof, blockers, pool_nodes, prove_cluster
from themelio_gpu.verify.render import render_release
from themelio_gpu.verify.validation import ValidationResult
from themelio_gpu.verify.workloads import NFD_LABEL_PREFIX, Workload, chart_workloads


def _by_operator(key: str) -> bool:
    """A label NVIDIA's controller sets on a sandbox node by itself (not one that needs GFD's labels first)."""
    return key in (GPU_PRESENT, DRIVER_OWNER) or (key.startswith(DEPLOY) and key != DEPLOY_MIG_MANAGER)


def _counterpart(pool: PoolProof, node: str, kind: str) -> str:
    """The model's node that stands for the sandbox's `node` of the pool."""
    names = [n.name for n in pool.nodes]
    return node if kind == "static" else names[0]


def _as_the_sandbox_labels(unsettled: Node, settled: Node, operator_runs: bool) -> Node:
    """The model's node before NFD and the operator label it, with the NFD labels the sandbox writes where NFD's
    worker runs (where verify's settled node has NFD's), and the operator's own where NVIDIA's controller runs in
    the sandbox and labels the node itself."""
    nfd = NFD_GPU_NODE if any(k.startswith(NFD_LABEL_PREFIX) for k in settled.labels) else {}
    by_operator = {k: v for k, v in settled.labels.items() if _by_operator(k)} if operator_runs else {}
    return Node(unsettled.name, {**unsettled.labels, **nfd, **by_operator}, unsettled.taints)


def predict(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[Predicted]:
    """verify's placement of every DaemonSet of the cluster's charts and of the operator's operands."""
    charts = installed_charts(plan, sandbox)
    with tempfile.TemporaryDirectory(prefix="themelio-verify-") as work:
        rendered = [
            render_release(str(toolbox.binary("helm")), spec, charts[spec.name], plan.definition, Path(work))
            for spec in plan.releases
        ]
    proof = prove_cluster(plan, rendered, ValidationResult())
    in_chart: dict[str, str] = {}  # DaemonSet -> its namespace, for those a chart renders
    for release in rendered:
        for workload in chart_workloads(release.spec.name, release.objects):
            in_chart[workload.name] = release.spec.namespace
    workloads = {w.name: w for w in proof.workloads}
    nodes = gpu_nodes(sandbox)
    operator_runs = bool(sandbox.state().get("gpuOperator", {}).get("runs"))
    verdicts: dict[tuple[str, str], dict[str, str]] = {}
    pending: dict[tuple[str, str], set[str]] = {}
    runtime: dict[tuple[str, str], set[str]] = {}
    for definition, pool in zip(plan.definition.node_pools, proof.pools, strict=True):
        mine = {node: kind for node, (name, kind) in nodes.items() if name == pool.pool.name}
        unsettled = {n.name: n for n in pool_nodes(definition, pool.pool)[1]}
        settled = {n.name: n for n in pool.nodes}
        for row in pool.rows:
            if row.source == "-":
                continue  # a requirement's row of its own ("no such DaemonSet is rendered"), no DaemonSet
            verdict = verdicts.setdefault((row.workload, row.source), {})
            for node, kind in mine.items():
                model = _counterpart(pool, node, kind)
                verdict[node] = "" if model in row.runs_on else row.outcome
                if model in row.pending_on:
                    pending.setdefault((row.workload, row.source), set()).add(node)
                placed = workloads.get(row.workload)
                if placed is not None and model in unsettled:
                    keys = _runtime_labels(
                        placed, settled[model], unsettled[model], proof.workloads, operator_runs
                    )
                    runtime.setdefault((row.workload, row.source), set()).update(keys)
    operator_namespace = plan.operator_release.namespace
    return [
        Predicted(
            in_chart.get(name, operator_namespace),
            name,
            source,
            name in in_chart,
            dict(sorted(found.items())),
            tuple(sorted(runtime.get((name, source), ()))),
            tuple(sorted(pending.get((name, source), ()))),
        )
        for (name, source), found in sorted(verdicts.items())
    ]


def _runtime_labels(
    workload: Workload, settled: Node, unsettled: Node, workloads: list[Workload], operator_runs: bool = False
) -> list[str]:
    """The runtime labels verify's verdict on the node rests on, which the sandbox does not give it ([] when the
    verdict is the same on the node as the sandbox labels it)."""
    plain = _as_the_sandbox_labels(unsettled, settled, operator_runs)
    if bool(blockers(workload, settled, workloads)) == bool(blockers(workload, plain, workloads)):
        return []
    return sorted(
        k for k in set(settled.labels) ^ set(plain.labels) if settled.labels.get(k) != plain.labels.get(k)
    )
