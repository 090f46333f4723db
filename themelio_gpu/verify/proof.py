"""`verify`: render every Helm release of each cluster with the real chart and prove, per GPU pool, that
each DaemonSet runs where it must and nowhere it must not.

Each pool's nodes are modelled from the pool's label and taint contract (`pool_contract.py`) plus what
the node gets at runtime: the kubelet's and Karpenter's well-known labels, NFD's PCI label (only if NFD's
worker runs there), and the labels the operator and GPU Feature Discovery add (only if they run there:
see `clusterpolicy_mode.py` and `gpucluster_mode.py`). Those labels decide where the next DaemonSets run,
so the model is iterated until nothing changes, then every DaemonSet is placed with the scheduler's
filters (`k8s/scheduling.py`).

Required, per pool: the NFD worker and every operand the operator creates run on every GPU pool; the
device plugin runs on every device-plugin pool and on no DRA pool; the DRA kubelet plugin runs on every
DRA pool and on no device-plugin pool; the MIG Manager runs on every MIG pool. Per cluster: the operator
release renders the resource of the cluster's mode (a ClusterPolicy, or with `draDriver.managedBy:
gpu-operator` a GPUCluster and no ClusterPolicy); no two DeviceClasses (ours, the charts' or those the
operator creates) share an extended resource name or a name; every object validates against the
cluster's Kubernetes version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from themelio_gpu.inputs.clusters.definition import NodePool
from themelio_gpu.inputs.clusters.pool_contract import INSTANCE_TYPE, PoolContract
from themelio_gpu.k8s.nvidia import DEPLOY
from themelio_gpu.k8s.scheduling import Node, why_not
from themelio_gpu.plan.helm.values import OPERATOR_CHART
from themelio_gpu.plan.manifests import device_class_manifest
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.verify.clusterpolicy_mode import ClusterPolicyMode
from themelio_gpu.verify.gpucluster_mode import GPUClusterMode
from themelio_gpu.verify.operator_model import OperatorMode
from themelio_gpu.verify.operator_modes import operator_mode
from themelio_gpu.verify.render import RenderedRelease
from themelio_gpu.verify.validation import ValidationResult
from themelio_gpu.verify.workloads import (
    NFD_LABEL_PREFIX,
    NFD_OS_LABELS,
    Role,
    Workload,
    chart_workloads,
    nfd_labels,
    nfd_os_labels,
    nfd_worker_config,
)
from themelio_gpu.words import count

KUBELET_LABELS = {"kubernetes.io/os": "linux"}
NFD_OS_GROUP = f"{NFD_LABEL_PREFIX}system-os_release."
MAX_ROUNDS = 10


class Expect(Enum):
    MUST = "must run"
    MUST_NOT = "must not run"
    MAY = "may run"


def expectation(role: Role, pool: PoolContract) -> Expect:
    mig = pool.mig_devices is not None
    match role:
        case Role.NFD_WORKER | Role.OPERAND:
            return Expect.MUST
        case Role.DEVICE_PLUGIN:
            return Expect.MUST_NOT if pool.dra else Expect.MUST
        case Role.DEVICE_PLUGIN_PART:
            return Expect.MUST_NOT if pool.dra else Expect.MAY
        case Role.MIG_MANAGER:
            return Expect.MUST if mig else Expect.MAY
        case Role.DRA_PLUGIN:
            return Expect.MUST if pool.dra else Expect.MUST_NOT
        case _:
            return Expect.MAY


@dataclass(frozen=True)
class Row:
    workload: str
    source: str
    expect: Expect
    outcome: str
    ok: bool | None
    """None: no requirement on this pool."""
    runs_on: tuple[str, ...] = ()
    """The pool's modelled nodes its pods run on: what `sandbox probe` compares with the DaemonSet controller."""
    pending_on: tuple[str, ...] = ()
    """The pool's modelled nodes where only its claims stop it: the DaemonSet controller (which checks selectors
    and taints, not claims) creates a pod there that the scheduler never binds, so it stays Pending."""


@dataclass
class PoolProof:
    pool: PoolContract
    how: str
    nodes: tuple[Node, ...]
    base_labels: Mapping[str, str]
    rows: list[Row] = field(default_factory=list)

    @property
    def kind(self) -> str:
        kind = "DRA" if self.pool.dra else "device plugin"
        return kind + (", MIG" if self.pool.mig_devices is not None else "")


@dataclass
class ClusterProof:
    plan: ClusterPlan
    lines: list[str] = field(default_factory=list)
    pools: list[PoolProof] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    """Every DaemonSet placed: the charts' and the operator's operands."""


# --- the nodes of a pool ---------------------------------------------------------------------------------


def pool_nodes(pool: NodePool, contract: PoolContract) -> tuple[str, tuple[Node, ...]]:
    """The pool's nodes as they register (before NFD or the operator act), and how they come to be."""
    base = {**KUBELET_LABELS, **contract.labels}
    provisioning = pool.provisioning
    nodes: list[Node] = []
    if provisioning.static is not None:
        how = "static"
        names: list[tuple[str, dict[str, str]]] = [(n, {}) for n in provisioning.static.nodes]
    elif provisioning.karpenter is not None:
        # Karpenter sets the instance type it launched, its own labels, and the NodePool's template labels.
        how = "Karpenter"
        karpenter = provisioning.karpenter
        names = []
        for instance in karpenter.instance_types:
            for capacity in karpenter.capacity_types or ("",):
                labels = {
                    INSTANCE_TYPE: instance,
                    "karpenter.sh/nodepool": contract.name,
                    "karpenter.sh/registered": "true",
                    "karpenter.sh/initialized": "true",
                }
                if capacity:
                    labels["karpenter.sh/capacity-type"] = capacity
                names.append(("-".join(filter(None, (contract.name, instance, capacity))), labels))
    else:
        how = "provisioned"
        names = [(f"{contract.name}-node", {})]
    for name, extra in names:
        labels = {**base, **extra, "kubernetes.io/hostname": name}
        nodes.append(Node(name, dict(sorted(labels.items())), contract.taints))
    return how, tuple(nodes)


def blockers(workload: Workload, node: Node, workloads: Sequence[Workload]) -> list[str]:
    """Why the workload's pods cannot run on the node ([] when they can): the scheduler's node filters, and
    for a pod that claims DRA devices, the kubelet plugin that would publish them on that node."""
    reasons = why_not(workload.scheduling, node)
    if workload.needs_devices_from is not None:
        plugin = next((w for w in workloads if w.name == workload.needs_devices_from), None)
        if plugin is None or not plugin.created or why_not(plugin.scheduling, node):
            reasons.append(
                f"its ResourceClaim needs a device that {workload.needs_devices_from} publishes, "
                "and that does not run here"
            )
    return reasons


def settle(
    node: Node,
    workloads: Sequence[Workload],
    mode: OperatorMode | None,
    nfd_config: Mapping[str, Any],
    pool: PoolContract,
) -> Node | None:
    """The node once NFD, the operator and GFD have labelled it, as far as their DaemonSets reach it
    (None if the labels never settle)."""
    labels = dict(node.labels)
    for _ in range(MAX_ROUNDS):
        current = Node(node.name, labels, node.taints)
        running = {w.name for w in workloads if w.created and not blockers(w, current, workloads)}
        new = dict(node.labels)
        if any(w.role is Role.NFD_WORKER and w.name in running for w in workloads):
            new.update(nfd_labels(nfd_config, pool.product))
            new.update(nfd_os_labels(nfd_config))
        if mode is not None:
            new = mode.label(new, running, pool)
        if new == labels:
            return current
        labels = new
    return None


# --- placing each DaemonSet -------------------------------------------------------------------------------


def place(workload: Workload, expect: Expect, nodes: Sequence[Node], workloads: Sequence[Workload] = ()) -> Row:
    if not workload.created:
        # An operand switched off in the values is a choice (dcgm, a host driver); the device plugin on a
        # device-plugin pool and the MIG Manager on a MIG pool are needed whatever the values say.
        if workload.role is Role.OPERAND:
            expect = Expect.MAY
        return Row(
            workload.name, workload.source, expect, f"not created ({workload.not_created})", _ok(expect, False)
        )
    results = [(n, blockers(workload, n, workloads)) for n in nodes]
    blocked = [(n, reasons) for n, reasons in results if reasons]
    runs_on = tuple(n.name for n, reasons in results if not reasons)
    pending_on = tuple(n.name for n, _ in blocked if not why_not(workload.scheduling, n))
    if not blocked:
        return Row(workload.name, workload.source, expect, "runs", _ok(expect, True), runs_on)
    detail = "; ".join(blocked[0][1])
    if len(blocked) == len(results):
        same = all(reasons == blocked[0][1] for _, reasons in blocked)
        where = "" if same or len(nodes) == 1 else f" on {blocked[0][0].name}"
        outcome = f"does not run{where}: {detail}"
        return Row(workload.name, workload.source, expect, outcome, _ok(expect, False), (), pending_on)
    outcome = f"runs on {len(results) - len(blocked)} of {count(len(results), 'node')}; not on {blocked[0][0].name}: {detail}"
    ok = None if expect is Expect.MAY else False
    return Row(workload.name, workload.source, expect, outcome, ok, runs_on, pending_on)


def _ok(expect: Expect, runs: bool) -> bool | None:
    if expect is Expect.MAY:
        return None
    return runs == (expect is Expect.MUST)


# --- the proof of one cluster ----------------------------------------------------------------------------


def prove_cluster(
    plan: ClusterPlan, rendered: Sequence[RenderedRelease], validation: ValidationResult
) -> ClusterProof:
    proof = ClusterProof(plan)
    workloads: list[Workload] = []
    nfd_config: Mapping[str, Any] = {}
    mode: OperatorMode | None = None
    mode_problems: list[str] = []
    for release in rendered:
        found = chart_workloads(release.spec.name, release.objects)
        workloads.extend(found)
        if any(w.role is Role.NFD_WORKER for w in found):
            nfd_config = nfd_worker_config(release.objects)
        proof.lines.append(
            f"release {release.spec.name}: chart {release.spec.chart} {release.spec.version}, "
            f"namespace {release.spec.namespace}, {count(len(release.objects), 'object')}, {count(len(found), 'DaemonSet')}"
        )
        if release.spec.chart == OPERATOR_CHART:
            found_mode = operator_mode(release.objects, release.spec.version)
            mode_problems.extend(found_mode.problems)
            if found_mode.mode is not None:
                mode = found_mode.mode
    if mode is not None:
        operands = mode.workloads()
        workloads.extend(operands)
        created = sum(w.created for w in operands)
        sources = ", ".join(dict.fromkeys(w.source for w in operands))
        proof.lines.append(
            f"operands: {count(created, 'DaemonSet')} the operator creates from {sources} "
            "(modelled; not in the chart)"
        )
        mode_problems.extend(mode.unmodelled())
        mode_problems.extend(_wrong_mode(plan, mode))
    for problem in mode_problems:
        proof.failures.append(f"GPU Operator: {problem}")

    _check_device_classes(proof, plan, rendered, mode)
    _report_validation(proof, validation)

    proof.workloads = workloads
    for pool_definition, contract in zip(plan.definition.node_pools, plan.pools, strict=True):
        proof.pools.append(
            _prove_pool(proof, pool_definition, contract, workloads, mode, nfd_config, mode_problems)
        )
    return proof


def _prove_pool(
    proof: ClusterProof,
    pool_definition: NodePool,
    contract: PoolContract,
    workloads: Sequence[Workload],
    mode: OperatorMode | None,
    nfd_config: Mapping[str, Any],
    mode_problems: Sequence[str],
) -> PoolProof:
    how, nodes = pool_nodes(pool_definition, contract)
    settled = [settle(n, workloads, mode, nfd_config, contract) for n in nodes]
    if any(s is None for s in settled):
        proof.failures.append(
            f"pool {contract.name}: the node labels never settle (a DaemonSet's placement "
            "depends on labels its own running changes)"
        )
    pool = PoolProof(contract, how, tuple(s for s in settled if s is not None) or nodes, nodes[0].labels)
    pool.rows = [place(w, expectation(w.role, contract), pool.nodes, workloads) for w in workloads]
    for role in (Role.NFD_WORKER, Role.DRA_PLUGIN):
        if not any(w.role is role for w in workloads) and expectation(role, contract) is Expect.MUST:
            pool.rows.append(Row(role.value, "-", Expect.MUST, "no such DaemonSet is rendered", False))
    if mode is None:
        problems = "; ".join(mode_problems) or "no operator mode"
        pool.rows.append(Row("operator operands", "-", Expect.MUST, problems, False))
    for row in pool.rows:
        if row.ok is False:
            proof.failures.append(
                f"pool {contract.name}: DaemonSet {row.workload} ({row.source}) {row.expect.value} here, "
                f"but {row.outcome}"
            )
    return pool


def _wrong_mode(plan: ClusterPlan, mode: OperatorMode) -> list[str]:
    """The operator must run in the cluster's mode: draDriver.managedBy says which resource it reads."""
    wanted = GPUClusterMode.kind if plan.definition.dra_by_gpu_operator else ClusterPolicyMode.kind
    if mode.kind == wanted:
        return []
    setting = f"draDriver.managedBy: {plan.definition.dra_driver.managed_by.value}"
    return [f"{setting} needs a {wanted} and no {mode.kind}, but the operator release renders {mode.resource}"]


def _check_device_classes(
    proof: ClusterProof, plan: ClusterPlan, rendered: Sequence[RenderedRelease], mode: OperatorMode | None
) -> None:
    classes: list[tuple[str, Mapping[str, Any]]] = [
        ("this stack", device_class_manifest(c, plan.names)) for c in plan.device_classes
    ]
    for release in rendered:
        classes.extend(
            (f"chart {release.spec.name}", o) for o in release.objects if o.get("kind") == "DeviceClass"
        )
    ours_and_charts = len(classes)
    if mode is not None:
        classes.extend((mode.resource, o) for o in mode.device_classes())
    by_resource: dict[str, list[str]] = {}
    by_name: dict[str, list[str]] = {}
    for source, obj in classes:
        name = str((obj.get("metadata") or {}).get("name"))
        by_name.setdefault(name, []).append(source)
        resource = (obj.get("spec") or {}).get("extendedResourceName")
        if resource:
            by_resource.setdefault(str(resource), []).append(f"{name} ({source})")
    for resource, owners in sorted(by_resource.items()):
        if len(owners) > 1:
            proof.failures.append(
                f"extended resource name {resource} is advertised by {len(owners)} DeviceClasses: "
                f"{', '.join(owners)}; the scheduler uses only the newest"
            )
    for name, sources in sorted(by_name.items()):
        if len(sources) > 1:
            proof.failures.append(f"DeviceClass {name} is created by {' and '.join(sources)}")
    ours = len(plan.device_classes)
    made = f", {len(classes) - ours_and_charts} the operator creates" if mode and mode.device_classes() else ""
    proof.lines.append(
        f"DeviceClasses: {len(classes)} ({ours} from this stack, {ours_and_charts - ours} from the charts{made}), "
        f"{count(len(by_resource), 'extended resource name')}"
    )


def _report_validation(proof: ClusterProof, validation: ValidationResult) -> None:
    version = proof.plan.definition.kubernetes_version
    line = f"schemas: {validation.valid} objects valid against Kubernetes {validation.version or version}"
    if validation.invalid:
        line += f", {len(validation.invalid)} invalid"
    if validation.skipped:
        line += f"; skipped, no schema (custom resources): {', '.join(sorted(set(validation.skipped)))}"
    proof.lines.append(line)
    proof.failures.extend(f"schema: {item}" for item in validation.invalid)


# --- the report ------------------------------------------------------------------------------------------


def _runtime_labels(pool: PoolProof) -> str:
    added = sorted({k for n in pool.nodes for k in n.labels if k not in pool.base_labels})
    shown = [k for k in added if not k.startswith(DEPLOY) and k not in NFD_OS_LABELS]
    for group, keys in ((NFD_OS_GROUP, NFD_OS_LABELS), (DEPLOY, [k for k in added if k.startswith(DEPLOY)])):
        found = [k for k in keys if k in added]
        if found:
            shown.append(f"{group}* ({len(found)})")
    if not any(k.startswith(NFD_LABEL_PREFIX) for k in added):
        shown.append("no NFD label: NFD's worker does not run here, so the operator never sees a GPU")
    return ", ".join(shown)


def render_proof(proof: ClusterProof) -> str:
    definition = proof.plan.definition
    out = [f"cluster {definition.name} (Kubernetes {definition.kubernetes_version}, {proof.plan.file})"]
    out += [f"  {line}" for line in proof.lines]
    for pool in proof.pools:
        nodes = ", ".join(n.name for n in pool.nodes)
        out.append(f"  pool {pool.pool.name} ({pool.kind}; {pool.how}: {nodes})")
        out.append(f"    runtime labels in the model: {_runtime_labels(pool)}")
        width = max((len(r.workload) for r in pool.rows), default=0)
        source_width = max((len(r.source) for r in pool.rows), default=0)
        for row in pool.rows:
            status = {True: "ok  ", False: "FAIL", None: "-   "}[row.ok]
            out.append(
                f"    {status}  {row.workload.ljust(width)}  {row.source.ljust(source_width)}  "
                f"{row.expect.value.ljust(12)}  {row.outcome}"
            )
    if proof.failures:
        out.append(f"  FAILED: {count(len(proof.failures), 'problem')}")
        out += [f"    {definition.name}: {f}" for f in proof.failures]
    else:
        out.append("  OK: every operand lands on every pool it must, and on none it must not")
    return "\n".join(out)
