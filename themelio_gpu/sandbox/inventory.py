"""What the stack leaves in the API: every object and node contract before apply, compared after destroy.

`up` records the baseline (every object of every kind the API server's discovery lists, namespaced and
cluster-scoped, ServiceAccounts and ControllerRevisions included; each node's labels and taints); after
`destroy`, anything new, and any node whose labels or taints differ, is left behind by the stack, its providers
or its charts. NOT_COMPARED names the few kinds that hold no object anyone applies, each with the reason.
"""

from __future__ import annotations

import json
import tarfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from themelio_gpu import interrupts
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.cluster import KUBECTL, Sandbox
from themelio_gpu.sandbox.components.nfd_worker import MANAGER as NFD_MANAGER
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import Toolbox

NOT_COMPARED = {
    "events": "records of what happened, which expire by themselves",
    "events.events.k8s.io": "the same events",
    "leases.coordination.k8s.io": "heartbeats of running programs (node leases, leader election)",
    "componentstatuses": "not stored: the API server's view of its components",
    "nodes": "compared apart: their labels and taints (node_contract)",
    "resourceslices.resource.k8s.io": "the devices the nodes publish (the sandbox's or the DRA driver's)",
}
"""Kinds of the API server's discovery that are not compared, and why: every other kind is."""

CONTROL_PLANE_MANAGERS = frozenset(
    {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "api-priority-and-fairness-config-producer-v1"}
)
"""Field managers of the control plane itself. An object only they ever wrote, and that no other object owns,
is the control plane's own (the kube-apiserver-serving ClusterTrustBundle the controller manager publishes a
moment after start, sometimes after the baseline; the API server's flow-control objects): never the stack's.
Objects the garbage collector should have removed with a stack's object keep their ownerReferences, so they are
still compared."""
IN_EVERY_NAMESPACE = frozenset({("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")})
"""What the controller manager puts in every namespace (the default ServiceAccount with no managedFields at
all): it goes with its namespace, and stays in those Helm keeps."""


def made_by_control_plane(item: dict[str, Any]) -> bool:
    metadata = item.get("metadata", {})
    managers = {entry.get("manager") for entry in metadata.get("managedFields") or []}
    return bool(managers) and managers <= CONTROL_PLANE_MANAGERS and not metadata.get("ownerReferences")


def compared_kinds(discovered: list[str]) -> list[str]:
    """The kinds (`kubectl api-resources -o name`) whose objects are compared: all but NOT_COMPARED."""
    return [kind for kind in discovered if kind not in NOT_COMPARED]


def objects_of(items: list[dict[str, Any]], *, control_plane_own: bool = True) -> dict[str, bool]:
    """{kind/namespace/name: whether another object owns it (the garbage collector removes it with its owner)}
    of the listed items, less what is IN_EVERY_NAMESPACE and, unless `control_plane_own`, less what only the
    control plane ever wrote."""
    objects = {}
    for item in items:
        metadata = item.get("metadata", {})
        if (item.get("kind"), metadata.get("name")) in IN_EVERY_NAMESPACE or (
            not control_plane_own and made_by_control_plane(item)
        ):
            continue
        name = f"{item.get('kind')}/{metadata.get('namespace') or ''}/{metadata.get('name')}"
        objects[name] = bool(metadata.get("ownerReferences"))
    return objects


def api_objects(sandbox: Sandbox, toolbox: Toolbox, *, control_plane_own: bool = True) -> dict[str, bool]:
    """Every object of the compared kinds the API lists (objects_of)."""
    return objects_of(api_items(sandbox, toolbox), control_plane_own=control_plane_own)


def api_items(sandbox: Sandbox, toolbox: Toolbox) -> list[dict[str, Any]]:
    """Every object of the compared kinds, as the API lists it (with its managed fields)."""
    kubectl = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig)]
    kinds = interrupts.run([*kubectl, "api-resources", "--verbs=list", "-o", "name"])
    if kinds.returncode != 0:
        raise SandboxError(f"kubectl api-resources: {kinds.stderr.strip()}")
    listed = interrupts.run(
        [*kubectl, "get", ",".join(compared_kinds(kinds.stdout.split())), "-A", "--ignore-not-found", "-o", "json",
         "--show-managed-fields"]
    )  # fmt: skip
    if listed.returncode != 0:
        raise SandboxError(f"kubectl get: {listed.stderr.strip()}")
    items: list[dict[str, Any]] = json.loads(listed.stdout or '{"items": []}').get("items", [])
    return items


def _entry(item: dict[str, Any]) -> str:
    metadata = item.get("metadata", {})
    return f"{item.get('kind')}/{metadata.get('namespace') or ''}/{metadata.get('name')}"


def kept_with_what_they_own(items: list[dict[str, Any]], kept: set[str]) -> set[str]:
    """`kept`, the objects their charts mark `helm.sh/resource-policy: keep` (Helm never deletes them, and the
    chart's own pre-delete hook Job that would, the GPU Operator's GPUCluster, runs no container in the sandbox),
    and everything those own, however deep (the garbage collector removes it only with its owner: the operands
    NVIDIA's controller made from the kept GPUCluster)."""
    kept = set(kept)
    for item in items:
        if (item.get("metadata", {}).get("annotations") or {}).get("helm.sh/resource-policy") == "keep":
            kept.add(_entry(item))
    uids = {item["metadata"].get("uid"): _entry(item) for item in items}
    while True:
        owned = {
            _entry(item)
            for item in items
            if _entry(item) not in kept
            and any(uids.get(o.get("uid")) in kept for o in item["metadata"].get("ownerReferences") or [])
        }
        if not owned:
            return kept
        kept |= owned


LABELS_LEFT_BY_DESIGN = {
    "gpu-operator": "the GPU Operator's",
    NFD_MANAGER: "NFD's, as the sandbox writes them where its worker runs",
}
"""Field managers whose node labels stay when the stack is uninstalled -> whose they are, as `down` says it. The
GPU Operator's: with no ClusterPolicy or GPUCluster left it skips node labeling
(controllers/nodelabeling_controller.go), and nothing else removes them, on a real cluster as here. NFD's: its
master removes a node's labels only with the NodeFeature objects its worker wrote, which an uninstall leaves
unless NFD's prune job runs (components/nfd_worker.py writes them here)."""


def labels_by_design(sandbox: Sandbox, toolbox: Toolbox) -> dict[str, dict[str, str]]:
    """node -> label key -> whose it is, for the labels a manager of LABELS_LEFT_BY_DESIGN wrote last."""
    kubectl = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig)]
    result = interrupts.run([*kubectl, "get", "nodes", "-o", "json", "--show-managed-fields"])
    if result.returncode != 0:
        raise SandboxError(f"kubectl get nodes: {result.stderr.strip()}")
    found: dict[str, dict[str, str]] = {}
    for node in json.loads(result.stdout)["items"]:
        for entry in node["metadata"].get("managedFields") or []:
            whose = LABELS_LEFT_BY_DESIGN.get(entry.get("manager", ""))
            if whose is not None:
                labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
                found.setdefault(node["metadata"]["name"], {}).update(
                    {k[2:]: whose for k in labels if k.startswith("f:")}
                )
    return found


CONTROL_PLANE_NODE_KEYS = ("beta.kubernetes.io/", "node.kubernetes.io/")
"""Node labels and taints the control plane itself sets and clears (the deprecated beta labels, the node
lifecycle controller's not-ready and unreachable taints): never the stack's."""


def _stack_keys(items: dict[str, str] | list[dict[str, str]]) -> Any:
    if isinstance(items, dict):
        return {k: v for k, v in items.items() if not k.startswith(CONTROL_PLANE_NODE_KEYS)}
    return sorted(json.dumps(t, sort_keys=True) for t in items if not t["key"].startswith(CONTROL_PLANE_NODE_KEYS))


def node_contract(sandbox: Sandbox, toolbox: Toolbox) -> dict[str, Any]:
    """Each node's labels and taints, less the control plane's own, to compare before apply and after destroy."""
    kubectl = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig)]
    result = interrupts.run([*kubectl, "get", "nodes", "-o", "json"])
    if result.returncode != 0:
        raise SandboxError(f"kubectl get nodes: {result.stderr.strip()}")
    return {n["metadata"]["name"]: _contract_of(n) for n in json.loads(result.stdout)["items"]}


def _contract_of(node: dict[str, Any]) -> dict[str, Any]:
    return {
        "labels": _stack_keys(node["metadata"].get("labels", {})),
        "taints": _stack_keys(node.get("spec", {}).get("taints", [])),
    }


def record_baseline(sandbox: Sandbox, toolbox: Toolbox) -> None:
    baseline = {"objects": sorted(api_objects(sandbox, toolbox)), "nodes": node_contract(sandbox, toolbox)}
    (sandbox.folder / "baseline.json").write_text(json.dumps(baseline, indent=1, sort_keys=True) + "\n")


def record_joined_nodes(sandbox: Sandbox, manifests: list[dict[str, Any]]) -> None:
    """Nodes the sandbox joins after `up` (those of a pool an upgrade adds: the cloud's, not the stack's) go into
    the baseline as they were created, so that `down` counts only what the stack did to them."""
    path = sandbox.folder / "baseline.json"
    if not path.is_file():
        return
    baseline = json.loads(path.read_text())
    baseline["nodes"].update({m["metadata"]["name"]: _contract_of(m) for m in manifests})
    path.write_text(json.dumps(baseline, indent=1, sort_keys=True) + "\n")


def kept_by_helm(plan: ClusterPlan, charts: Path) -> set[str]:
    """What Helm leaves after `uninstall` by design, never the stack's to remove: the CRDs of each chart's
    `crds/` folders, which Helm never deletes (helm.sh/docs/chart_best_practices/custom_resource_definitions),
    and the namespace Helm created for a release (`create_namespace`; `helm uninstall` leaves it)."""
    kept = {f"Namespace//{release.namespace}" for release in plan.releases}
    for release in plan.releases:
        # The chart the stack installs: a local chart folder's archive (shipped with the stack), else the cache's.
        texts = _crd_texts_in_archive(release.archive.source) if release.archive is not None else [
            file.read_text() for file in sorted((charts / f"{release.chart}-{release.version}").glob("**/crds/**/*.yaml"))
        ]  # fmt: skip
        for text in texts:
            for document in yaml.safe_load_all(text):
                if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                    kept.add(f"CustomResourceDefinition//{document['metadata']['name']}")
    return kept


def _crd_texts_in_archive(archive: Path) -> list[str]:
    """The texts of a packaged chart's `crds/` YAML files (its subcharts' too), as Helm installs them."""
    with tarfile.open(archive, mode="r:gz") as charts:
        members = sorted(
            (m for m in charts.getmembers() if m.isfile() and "crds" in PurePosixPath(m.name).parts[:-1]),
            key=lambda m: m.name,
        )
        files = [charts.extractfile(m) for m in members if m.name.endswith(".yaml")]
        return [f.read().decode("utf-8") for f in files if f is not None]


def leftovers(
    sandbox: Sandbox, toolbox: Toolbox, kept: set[str], wait: float = 60.0
) -> tuple[list[str], list[str]]:
    """What is in the API after destroy that was not there before apply, and node labels or taints that differ
    from before apply; apart, what is left by design (`kept`: what Helm keeps; what that owns; the GPU
    Operator's and NFD's node labels). Namespaces and the objects another owns (a DaemonSet's ControllerRevisions, a
    Service's EndpointSlices) are given `wait` seconds to be removed by the namespace and garbage collectors."""
    baseline = json.loads((sandbox.folder / "baseline.json").read_text())
    before = set(baseline["objects"])
    deadline = time.monotonic() + wait
    while True:
        items = api_items(sandbox, toolbox)
        now = objects_of(items, control_plane_own=False)
        extra = sorted(set(now) - before)
        by_design = kept_with_what_they_own(items, kept)
        pending = [e for e in extra if e not in by_design and (e.startswith("Namespace/") or now[e])]
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(1)
    lines = [e for e in extra if e not in by_design]
    left_by_design = [e for e in extra if e in by_design]
    designed = labels_by_design(sandbox, toolbox)
    for node, now_node in node_contract(sandbox, toolbox).items():
        then = baseline["nodes"].get(node, {"labels": {}, "taints": []})
        for key in sorted(set(now_node["labels"]) | set(then["labels"])):
            if now_node["labels"].get(key) != then["labels"].get(key):
                line = f"Node/{node}: label {key}={now_node['labels'].get(key)} (before apply: {then['labels'].get(key)})"
                whose = designed.get(node, {}).get(key)
                (left_by_design if whose else lines).append(line + (f" ({whose})" if whose else ""))
        if now_node["taints"] != then["taints"]:
            lines.append(f"Node/{node}: taints {now_node['taints']} (before apply: {then['taints']})")
    return lines, left_by_design
