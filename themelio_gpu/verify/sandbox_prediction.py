"""verify's prediction for a sandbox: on which of the sandbox's GPU nodes each DaemonSet runs, as `verify` proves it.

The charts are the ones the sandbox installed (its chart repository's archives, or a local chart folder's), each
rendered as `verify` renders it (`render.py`: the stack's values, the cluster's Kubernetes version); the proof
is `verify`'s own (`proof.py`: each pool's nodes modelled from its contract and settled with the labels NFD and
the operator add, each DaemonSet placed there). Each sandbox node gets the verdict of its counterpart in the
model: a static node is itself; a provisioned pool's nodes are alike, as verify's one node of it; a Karpenter
node is the model's node of the pool's first instance and capacity type, which the sandbox makes it from.
`sandbox probe` compares these with the nodes the real DaemonSet controller chose (`sandbox/daemonsets.py`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.daemonsets import Predicted, gpu_nodes, installed_charts
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.verify.proof import PoolProof, prove_cluster
from themelio_gpu.verify.render import render_release
from themelio_gpu.verify.validation import ValidationResult
from themelio_gpu.verify.workloads import chart_workloads


def _counterpart(pool: PoolProof, node: str, kind: str) -> str:
    """The model's node that stands for the sandbox's `node` of the pool."""
    names = [n.name for n in pool.nodes]
    return node if kind == "static" else names[0]


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
    nodes = gpu_nodes(sandbox)
    verdicts: dict[tuple[str, str], dict[str, str]] = {}
    for pool in proof.pools:
        mine = {node: kind for node, (name, kind) in nodes.items() if name == pool.pool.name}
        for row in pool.rows:
            if row.source == "-":
                continue  # a requirement's row of its own ("no such DaemonSet is rendered"), no DaemonSet
            verdict = verdicts.setdefault((row.workload, row.source), {})
            for node, kind in mine.items():
                verdict[node] = "" if _counterpart(pool, node, kind) in row.runs_on else row.outcome
    operator_namespace = plan.operator_release.namespace
    return [
        Predicted(
            in_chart.get(name, operator_namespace), name, source, name in in_chart, dict(sorted(found.items()))
        )
        for (name, source), found in sorted(verdicts.items())
    ]
