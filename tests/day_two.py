"""The day-two scenarios: each a change of the day-two fixture fleet (tests/fixtures/fleets/day-two), committed
in a scratch git repository on top of the one before, with the disruption it must cause written down here
before it was run. `tests/test_day_two.py` upgrades one sandbox through them in order (`sandbox upgrade day2
--from <previous revision>`) and holds each report against its expectation; docs/day-two.md explains them.

A revision is made by an edit of the fleet's files (exact text replacements: a replacement that finds nothing
fails, so a scenario never silently becomes a no-op). The drift scenario commits nothing: its `hand_edits`
change the cluster between two applies of the same revision.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.requirements import ROOT

FLEET = ROOT / "tests" / "fixtures" / "fleets" / "day-two"
CLUSTER = "day2"
STACK_FILE = Path("stacks") / f"{CLUSTER}.yaml"
CATALOG_FILE = Path("catalog") / "gpu-catalog.yaml"

LABELS = 'kubernetes_labels.node_labels_{pool}["{node}"]'
TAINTS = 'kubernetes_node_taint.node_taints_{pool}["{node}"]'
CLASS = 'kubernetes_manifest.device_class["{name}"]'
CONFIG_MAP = "kubernetes_config_map_v1.catalog_config_map"
NODE_POOL_L4 = "kubernetes_manifest.karpenter_node_pool_l4"
OPERATOR = "helm_release.gpu_operator"
DRA = "helm_release.dra_driver_nvidia_gpu"

Edit = tuple[Path, str, str]
"""(file in the fleet, text, its replacement)."""


@dataclass(frozen=True)
class Expected:
    """The disruption a scenario must cause, written down before it ran."""

    plan: Mapping[str, str]
    """Every address the real plan acts on, with its action (create, update, replace, destroy, move); changed
    must predict the same, except for the `drift` addresses, which it cannot see."""
    drift: frozenset[str] = frozenset()
    disturbed: Mapping[str, str] = field(default_factory=dict)
    """Workloads the upgrade disturbs, with the start of their outcome; every other one keeps its device (or
    was Pending before)."""
    new_pods: Mapping[str, str] = field(default_factory=dict)
    """Names a new pod asks for after the upgrade, with the class it must be allocated through."""
    classes_gone: frozenset[str] = frozenset()
    classes_new: frozenset[str] = frozenset()
    emulates: str | None = None
    """The Kubernetes version the control plane emulates afterwards (a version scenario restarts it)."""
    crds: str | None = None
    """What every CRD of the GPU Operator's chart must read back as."""
    operator: str | None = None
    """The version of NVIDIA's operator controller running after the apply (the build the new image names)."""
    driver_upgrade: bool = False
    """NVIDIA's rolling driver upgrade ran on every node with the driver and finished (else none ran)."""
    nodes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per node: `labels` (key: value, None for absent) and `taints` (the `key=value:effect` list, exactly)."""
    catalog_without: tuple[str, ...] = ()
    """Names the catalog ConfigMap (its quota keys, gpuLabel list, ...) must no longer hold afterwards."""


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    edits: tuple[Edit, ...]
    expected: Expected
    hand_edits: tuple[tuple[str, ...], ...] = ()
    """kubectl commands run between the two applies (drift); JSON replacements as `replace-json` entries."""
    cleanup: tuple[tuple[str, ...], ...] = ()
    """kubectl commands run once the scenario is checked: what the hand edits left that is nobody's to remove
    (`sandbox down` lists anything the stack did not find on a node)."""
    ci: bool = True
    """In CI's slice (`make test`): drift, kubernetes-1.35 and offering-renamed, which between them go through
    every step of `sandbox upgrade` but the GPU Operator's CRD hook and a new MIG layout (the stack's forced
    objects put back, the control plane restarted, a destroy, a create, a move and updates held against
    `changed`, workloads and new pods); the rest only in the full suite (`make day-two`)."""


def _pool_labels(pool: str) -> dict[str, Any]:
    return {"gpu.themelio.io/pool": pool}


def _spare_node_pool(name: str, taint: str, effect: str) -> str:
    """The fleet file's text of a static L4 pool on node day2-spare-0 with the GPU taint and `taint=true:effect`
    (the fixture's spare pool, or a pool added in its place)."""
    return (
        f"  - name: {name}\n    product: l4\n    gpusPerNode: 2\n    taints:\n"
        "      - {key: nvidia.com/gpu, value: present, effect: NoSchedule}\n"
        f'      - {{key: {taint}, value: "true", effect: {effect}}}\n'
        "    provisioning:\n      static:\n        nodes: [day2-spare-0]\n"
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "label-added",
        "a label added to one pool",
        (
            (
                STACK_FILE,
                "    gpusPerNode: 8\n    provisioning:\n      static:\n        nodes: [day2-a100-0]",
                "    gpusPerNode: 8\n    labels:\n      themelio.io/team: research\n    provisioning:\n      static:\n"
                "        nodes: [day2-a100-0]",
            ),
        ),
        Expected(
            plan={LABELS.format(pool="a100", node="day2-a100-0"): "update"},
            nodes={"day2-a100-0": {"labels": {"themelio.io/team": "research", "gpu.themelio.io/pool": "a100"}}},
        ),
        ci=False,
    ),
    Scenario(
        "drift",
        "a DeviceClass, a NodePool, a node's labels and its taints edited by hand between two applies",
        (),
        Expected(
            plan={
                CLASS.format(name="a100.gpu.themelio.io"): "update",
                NODE_POOL_L4: "update",
                LABELS.format(pool="a100", node="day2-a100-0"): "update",
                TAINTS.format(pool="a100", node="day2-a100-0"): "create",
                TAINTS.format(pool="spare", node="day2-spare-0"): "update",
            },
            drift=frozenset(
                {
                    CLASS.format(name="a100.gpu.themelio.io"),
                    NODE_POOL_L4,
                    LABELS.format(pool="a100", node="day2-a100-0"),
                    TAINTS.format(pool="a100", node="day2-a100-0"),
                    TAINTS.format(pool="spare", node="day2-spare-0"),
                }
            ),
            nodes={
                "day2-a100-0": {"labels": _pool_labels("a100"), "taints": ["nvidia.com/gpu=present:NoSchedule"]},
                # The pool's taints are one atomic list: the stack puts its own back, and the admin's goes.
                "day2-spare-0": {
                    "taints": ["nvidia.com/gpu=present:NoSchedule", "themelio.io/spare=true:PreferNoSchedule"]
                },
            },
        ),
        hand_edits=(
            (
                "replace-json",
                "deviceclass",
                "a100.gpu.themelio.io",
                "spec.selectors",
                '[{"cel": {"expression": "device.driver == \'gpu.nvidia.com\'"}}]',
            ),
            ("patch", "nodepool", "l4", "--type=merge", "-p", '{"spec": {"limits": {"nvidia.com/gpu": "16"}}}'),
            ("label", "node", "day2-a100-0", "gpu.themelio.io/pool=other", "--overwrite"),
            ("taint", "node", "day2-a100-0", "nvidia.com/gpu-"),
            ("taint", "node", "day2-spare-0", "admin.example/maintenance=true:NoSchedule"),
        ),
    ),
    Scenario(
        "gpu-operator-26.7",
        "the GPU Operator chart 26.3.3 -> 26.7.0, its CRDs upgraded",
        ((STACK_FILE, "  version: v26.3.3", "  version: v26.7.0"),),
        Expected(
            plan={OPERATOR: "update", DRA: "update"},
            crds="the chart's (v26.7.0)",
            operator="v26.7.0",
            # The new chart's driver (580.126.20 -> 595.91.07): NVIDIA's rolling driver upgrade deletes, node by
            # node, the pods its gpuPodSpecFilter (cmd/gpu-operator/main.go) calls GPU pods: a resource named
            # nvidia.com/gpu* or nvidia.com/mig-*, or a claim of the pod's own holding a gpu.nvidia.com device.
            # The pods asking for the catalog's other names (nvidia.com/a100, nvidia.com/l4, ...) are neither:
            # they keep running while the driver under them is replaced (driver_upgrade.py, docs/day-two.md).
            disturbed={
                "name-nvidia-com-gpu": "evicted",
                "claim-a100-gpu-themelio-io": "evicted",
                "claim-a100-mig-1g-5gb-gpu-themelio-io": "evicted",
                "claim-gpu-nvidia-com": "evicted",
                "claim-l4-gpu-themelio-io": "evicted",
                "claim-mig-nvidia-com": "evicted",
            },
            driver_upgrade=True,
        ),
        ci=False,
    ),
    Scenario(
        "dra-chart-rename",
        "the DRA driver chart nvidia-dra-driver-gpu 25.12.0 -> dra-driver-nvidia-gpu 0.4.1",
        ((STACK_FILE, "draDriver:\n  chart: nvidia-dra-driver-gpu\n  version: 25.12.0\n", ""),),
        Expected(plan={DRA: "update"}),
        ci=False,
    ),
    Scenario(
        "kubernetes-1.35",
        "Kubernetes 1.34 -> 1.35 (the control plane restarted, etcd kept)",
        ((STACK_FILE, 'kubernetesVersion: "1.34.2"', 'kubernetesVersion: "1.35.1"'),),
        Expected(plan={}, emulates="1.35"),
    ),
    Scenario(
        "kubernetes-1.36",
        "Kubernetes 1.35 -> 1.36 (DRAExtendedResource beta and on: the feature gate flags go)",
        (
            (STACK_FILE, 'kubernetesVersion: "1.35.1"', 'kubernetesVersion: "1.36.3"'),
            (
                STACK_FILE,
                "featureGates:\n  DRAExtendedResource:\n    enabled: true\n"
                "    components: [kube-apiserver, kube-scheduler, kube-controller-manager, kubelet]\n",
                "",
            ),
        ),
        Expected(plan={}, emulates="1.36"),
        ci=False,
    ),
    Scenario(
        "offering-renamed",
        "the A100 offering renamed (nvidia.com/a100-40gb, class a100-40gb.gpu.themelio.io), its pool renamed "
        "with renamedFrom",
        (
            (
                CATALOG_FILE,
                "  nvidia.com/a100:\n    deviceClass: a100.gpu.themelio.io",
                "  nvidia.com/a100-40gb:\n    deviceClass: a100-40gb.gpu.themelio.io",
            ),
            (STACK_FILE, "offerings: [nvidia.com/a100,", "offerings: [nvidia.com/a100-40gb,"),
            (STACK_FILE, "  - name: a100\n", "  - name: a100-40gb\n    renamedFrom: a100\n"),
        ),
        Expected(
            plan={
                CLASS.format(name="a100.gpu.themelio.io"): "destroy",
                CLASS.format(name="a100-40gb.gpu.themelio.io"): "create",
                LABELS.format(pool="a100-40gb", node="day2-a100-0"): "update",
                TAINTS.format(pool="a100-40gb", node="day2-a100-0"): "move",
                CONFIG_MAP: "update",
            },
            new_pods={"nvidia.com/a100-40gb": "a100-40gb.gpu.themelio.io"},
            classes_gone=frozenset({"a100.gpu.themelio.io"}),
            classes_new=frozenset({"a100-40gb.gpu.themelio.io"}),
            nodes={
                "day2-a100-0": {
                    "labels": _pool_labels("a100-40gb"),
                    "taints": ["nvidia.com/gpu=present:NoSchedule"],
                }
            },
        ),
    ),
    Scenario(
        "mig-layout",
        "a pool's MIG layout changed (all 1g.5gb -> all-balanced)",
        ((STACK_FILE, "    mig: {profile: 1g.5gb}", "    mig: {config: all-balanced}"),),
        Expected(
            plan={LABELS.format(pool="a100-mig", node="day2-mig-0"): "update"},
            # The MIG Manager destroys every MIG device of the GPUs it reconfigures: what held one loses it.
            disturbed={
                "name-nvidia-com-a100-mig-1g-5gb": "lost its device",
                "claim-a100-mig-1g-5gb-gpu-themelio-io": "lost its device",
                "claim-mig-nvidia-com": "lost its device",
            },
            nodes={
                "day2-mig-0": {"labels": {"nvidia.com/mig.config": "all-balanced", "mig_profile": "all-balanced"}}
            },
        ),
        ci=False,
    ),
    Scenario(
        "pool-removed",
        "a pool removed (its node keeps what others put there; its labels and taints go)",
        (
            (
                STACK_FILE,
                _spare_node_pool("spare", "themelio.io/spare", "PreferNoSchedule"),
                "",
            ),
        ),
        Expected(
            plan={
                LABELS.format(pool="spare", node="day2-spare-0"): "destroy",
                TAINTS.format(pool="spare", node="day2-spare-0"): "destroy",
                # NFD's worker tolerates every pool's taints (derived): the spare pool's go from its values. The
                # operands and the DRA kubelet plugin tolerate every taint: their values, the driver DaemonSet's
                # template and the DRA release stay as they are, so no driver pod restarts.
                OPERATOR: "update",
            },
            drift=frozenset({TAINTS.format(pool="spare", node="day2-spare-0")}),
            nodes={
                "day2-spare-0": {
                    "labels": {"gpu.themelio.io/pool": None, "nvidia.com/gpu": None, "admin.example/rack": "r1"},
                    # The provider deletes the pool's taints by applying an empty taint list, and the list is
                    # atomic: the admin's taint goes with them (docs/day-two.md says what to do).
                    "taints": [],
                }
            },
        ),
        hand_edits=(
            ("label", "node", "day2-spare-0", "admin.example/rack=r1"),
            ("taint", "node", "day2-spare-0", "admin.example/maintenance=true:NoSchedule"),
        ),
        cleanup=(("label", "node", "day2-spare-0", "admin.example/rack-"),),
        ci=False,
    ),
    Scenario(
        "pool-added",
        "a pool added on the node the removed one left, with a taint no pool had (only NFD's worker restarts)",
        (
            (
                STACK_FILE,
                "catalogConfigMap:",
                _spare_node_pool("standby", "themelio.io/standby", "NoSchedule") + "catalogConfigMap:",
            ),
        ),
        Expected(
            plan={
                LABELS.format(pool="standby", node="day2-spare-0"): "create",
                TAINTS.format(pool="standby", node="day2-spare-0"): "create",
                # NFD's worker must reach the new taint; the operands and the DRA kubelet plugin tolerate every
                # taint already: the driver DaemonSet's template is unchanged, and no driver pod restarts.
                OPERATOR: "update",
            },
            nodes={
                "day2-spare-0": {
                    "labels": {"gpu.themelio.io/pool": "standby", "nvidia.com/gpu": "true"},
                    "taints": ["nvidia.com/gpu=present:NoSchedule", "themelio.io/standby=true:NoSchedule"],
                }
            },
        ),
        ci=False,
    ),
    Scenario(
        "offering-removed",
        "an offering removed from the cluster (nvidia.com/l4: its class and quota keys go)",
        (
            (
                STACK_FILE,
                "offerings: [nvidia.com/a100-40gb, nvidia.com/a100-mig-1g.5gb, nvidia.com/l4, nvidia.com/gpu]",
                "offerings: [nvidia.com/a100-40gb, nvidia.com/a100-mig-1g.5gb, nvidia.com/gpu]",
            ),
        ),
        Expected(
            plan={CLASS.format(name="l4.gpu.themelio.io"): "destroy", CONFIG_MAP: "update"},
            classes_gone=frozenset({"l4.gpu.themelio.io"}),
            catalog_without=("nvidia.com/l4", "l4.gpu.themelio.io"),
        ),
        ci=False,
    ),
    Scenario(
        "class-renamed",
        "the DeviceClass of nvidia.com/a100-40gb renamed (a100-whole.gpu.themelio.io), its name kept: for the "
        "apply's length, two classes or none serve the one name",
        (
            (
                CATALOG_FILE,
                "  nvidia.com/a100-40gb:\n    deviceClass: a100-40gb.gpu.themelio.io",
                "  nvidia.com/a100-40gb:\n    deviceClass: a100-whole.gpu.themelio.io",
            ),
        ),
        Expected(
            plan={
                CLASS.format(name="a100-40gb.gpu.themelio.io"): "destroy",
                CLASS.format(name="a100-whole.gpu.themelio.io"): "create",
                CONFIG_MAP: "update",
            },
            new_pods={"nvidia.com/a100-40gb": "a100-whole.gpu.themelio.io"},
            classes_gone=frozenset({"a100-40gb.gpu.themelio.io"}),
            classes_new=frozenset({"a100-whole.gpu.themelio.io"}),
        ),
        ci=False,
    ),
)


# --- the scratch repository ----------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=day-two", "-c", "user.email=day-two@example.com", "-C", str(repo), *args],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def scratch_repository(repo: Path, fleet: Path = FLEET, stacks: Path | None = None) -> str:
    """A git repository holding this checkout's tool (so REF's own code is this code) and a fleet (the day-two
    fleet; `stacks` instead of the fleet's own), one commit; returns its SHA."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "themelio_gpu", repo / "themelio_gpu", ignore=ignore)
    for name in ("main.py", "Pipfile.lock"):
        shutil.copy(ROOT / name, repo / name)
    shutil.copytree(fleet / "catalog", repo / "catalog")
    shutil.copytree(stacks or fleet / "stacks", repo / "stacks")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "day two: the fleet as deployed")
    return git(repo, "rev-parse", "HEAD").strip()


def commit_scenario(repo: Path, scenario: Scenario) -> str:
    """Apply the scenario's edits and commit them; returns the new revision (the current one if none)."""
    for path, old, new in scenario.edits:
        text = (repo / path).read_text()
        if old not in text:
            raise AssertionError(f"{scenario.name}: {path} has no {old!r}")
        (repo / path).write_text(text.replace(old, new, 1))
    if scenario.edits:
        git(repo, "commit", "-q", "-am", f"day two: {scenario.title}")
    return git(repo, "rev-parse", "HEAD").strip()


def fleet_flags(repo: Path) -> list[str]:
    return ["--catalog", str(repo / CATALOG_FILE), "--stacks-dir", str(repo / "stacks")]


def themelio(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "themelio_gpu", *args],
        cwd=ROOT, capture_output=True, text=True, env=dict(env) if env is not None else None, timeout=timeout,
    )  # fmt: skip


def upgrade(
    repo: Path, ref: str, env: Mapping[str, str], charts: Path, cluster: str = CLUSTER
) -> tuple[int, dict[str, Any], str]:
    """`sandbox upgrade CLUSTER --from REF --json` with the charts of `charts` (not the checkout's chart cache,
    which a fresh clone has not filled): its exit code, report and standard error."""
    flags = [*fleet_flags(repo), "--charts", str(charts)]
    result = themelio("sandbox", "upgrade", cluster, "--from", ref, "--json", *flags, env=env)
    try:
        report = json.loads(result.stdout)
    except ValueError:
        report = {}
    return result.returncode, report, result.stderr


def hand_edit(command: tuple[str, ...], kubectl: Callable[..., str]) -> None:
    """One hand edit: a kubectl command, or `replace-json KIND NAME PATH JSON` (`kubectl replace` of the object
    with one field set, as an admin editing the object's YAML does)."""
    if command[0] != "replace-json":
        kubectl(*command)
        return
    _, kind, name, path, value = command
    item = json.loads(kubectl("get", kind, name, "-o", "json"))
    item["metadata"].pop("managedFields", None)
    target = item
    *parents, last = path.split(".")
    for part in parents:
        target = target[part]
    target[last] = json.loads(value)
    kubectl("replace", "-f", "-", stdin=json.dumps(item))


def disagreements(report: Mapping[str, Any], expected: Expected) -> list[str]:
    """Every way the report differs from the expected disruption (empty: the scenario passes)."""
    found = []
    if not report.get("ok"):
        found.append(
            f"the upgrade did not pass: {report.get('problems')} second plan: {report.get('second_plan')}"
        )
    real = {row["address"]: row["real"] for row in report.get("plan", []) if row["real"] != "no change"}
    if real != dict(expected.plan):
        found.append(f"real plan {real}, expected {dict(expected.plan)}")
    drifted = {row["address"] for row in report.get("plan", []) if row["drift"]}
    if drifted != set(expected.drift):
        found.append(f"drift at {sorted(drifted)}, expected at {sorted(expected.drift)}")
    for row in report.get("plan", []):
        if not row["agrees"]:
            found.append(f"changed disagrees at {row['address']}: {row['problems']}")
    for workload in report.get("workloads", []):
        wanted = expected.disturbed.get(workload["name"])
        outcome = workload["outcome"]
        if wanted is None and outcome != "kept its device" and not outcome.startswith("Pending before"):
            found.append(f"{workload['name']} ({workload['asks']}) was disturbed: {outcome}")
        elif wanted is not None and not outcome.startswith(wanted):
            found.append(f"{workload['name']} ({workload['asks']}): {outcome}, expected {wanted}")
    pods = {pod["name"]: pod for pod in report.get("new_pods", [])}
    for name, device_class in expected.new_pods.items():
        pod = pods.get(name, {})
        if pod.get("device_class") != device_class or not pod.get("node"):
            found.append(f"a new pod asking for {name}: {pod}, expected on class {device_class}")
    before, after = set(report.get("classes_before", {})), set(report.get("classes_after", {}))
    if before - after != set(expected.classes_gone) or after - before != set(expected.classes_new):
        found.append(f"DeviceClasses gone {sorted(before - after)}, new {sorted(after - before)}")
    # What DRAExtendedResource does to the classes, read back: a class kept through the upgrade keeps the
    # extended resource name it mapped (with the gate off the API server drops the field).
    for name in sorted(before & after):
        was, now = report["classes_before"][name], report["classes_after"][name]
        if was != now:
            found.append(f"DeviceClass {name}: extendedResourceName {was!r} before, {now!r} after")
    gaps = {k: v for k, v in report.get("class_gaps", {}).items() if v > 0}
    if gaps:
        found.append(f"classes or names missing for a while during the apply: {gaps}")
    emulates = report.get("control_plane", {}).get("emulates")
    if expected.emulates is not None and emulates != expected.emulates:
        found.append(f"the control plane emulates {emulates}, expected {expected.emulates}")
    if expected.crds is not None and set(report.get("crds", {}).values()) != {expected.crds}:
        found.append(f"CRDs {report.get('crds')}, expected each {expected.crds}")
    upgrade = report.get("driver_upgrade") or {}
    upgraded = sorted(n for n, seen in upgrade.get("states", {}).items() if len(seen) > 1)
    if expected.driver_upgrade and not (upgrade.get("finished") and upgraded):
        found.append(f"NVIDIA's driver upgrade: {upgrade}, expected it to run and finish")
    if not expected.driver_upgrade and upgraded:
        found.append(f"NVIDIA's driver upgrade went through {upgraded}, expected none")
    running = report.get("operator", {}).get("running")
    if expected.operator is not None and running != expected.operator:
        found.append(
            f"NVIDIA's operator controller running after the apply: {running}, expected {expected.operator}"
        )
    return found


def node_disagreements(nodes: Mapping[str, Any], expected: Expected) -> list[str]:
    """The expected labels and taints against the nodes as read (`kubectl get nodes -o json`'s items by name)."""
    found = []
    for name, wanted in expected.nodes.items():
        node = nodes[name]
        labels = node["metadata"].get("labels", {})
        for key, value in wanted.get("labels", {}).items():
            if labels.get(key) != value:
                found.append(f"node {name}: label {key}={labels.get(key)}, expected {value}")
        if "taints" in wanted:
            taints = sorted(
                f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in node.get("spec", {}).get("taints") or []
            )
            if taints != sorted(wanted["taints"]):
                found.append(f"node {name}: taints {taints}, expected {sorted(wanted['taints'])}")
    return found


def catalog_disagreements(config_map: Mapping[str, Any], expected: Expected) -> list[str]:
    """The names the catalog ConfigMap (`kubectl get configmap -o json`) must no longer hold, where it does."""
    data = json.dumps(config_map.get("data", {}))
    return [f"the catalog ConfigMap still names {name}" for name in expected.catalog_without if name in data]
