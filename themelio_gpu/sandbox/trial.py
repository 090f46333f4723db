"""`trial --sandbox CLUSTER`: the platform trial of the second seed, answered by the real scheduler.

The offline trial (`dryrun/trial.py`) says which devices each offering's class could be given, here on the
sandbox's own ResourceSlices. Then each offering is submitted the way the seed's recipes are: a
ResourceClaimTemplate of the DeviceClass the cluster has for the offering, and a pod claiming from it with
the offering's node selector and tolerations, one offering at a time. The real kube-scheduler allocates a
device, or says why not. Each allocation must be one of the devices the offline trial predicts, and a pod
stays Pending only where it predicts none.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.dryrun.resourceslices import parse_resourceslices
from themelio_gpu.dryrun.trial import TrialReport, render_trial, run_trial, trial_as_dict
from themelio_gpu.inputs.catalog.catalog import Catalog, ResolvedOffering
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import probe
from themelio_gpu.sandbox.cluster import KUBECTL, Sandbox, create_all, kubectl
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.tables import table

NAMESPACE = "themelio-trial"


@dataclass
class TrialRow:
    offering: str
    device_class: str
    predicted: list[str]
    """The devices the offline trial says the class could be given (`node/device`)."""
    allocated: list[str] = field(default_factory=list)
    """The devices the scheduler allocated (`node/device`)."""
    described: list[str] = field(default_factory=list)
    pending: str = ""

    @property
    def agrees(self) -> bool:
        if not self.allocated:
            return not self.predicted
        return set(self.allocated) <= set(self.predicted)


def _objects(index: int, offering: ResolvedOffering, device_class: str) -> list[dict[str, Any]]:
    template = f"trial-{index}"
    claim_template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": template, "namespace": NAMESPACE},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}
        },
    }
    spec: dict[str, Any] = {
        "containers": [
            {"name": "recipe", "image": "registry.invalid/recipe", "resources": {"claims": [{"name": "gpu"}]}}
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        "tolerations": [t.model_dump(exclude_none=True) for t in offering.tolerations],
    }
    if offering.node_selector:
        spec["nodeSelector"] = dict(offering.node_selector)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": template, "namespace": NAMESPACE}, "spec": spec}
    return [claim_template, pod]


def run(
    catalog: Catalog, plan: ClusterPlan, offerings: list[ResolvedOffering], sandbox: Sandbox, toolbox: Toolbox
) -> tuple[TrialReport, list[TrialRow]]:
    """The offline trial on the sandbox's ResourceSlices, and each offering's real allocation beside it."""
    slices = probe.dra_items(toolbox, sandbox, "resourceslices")
    if not slices:
        raise SandboxError(f"sandbox {plan.name} publishes no ResourceSlices: a trial needs DRA pools")
    devices = parse_resourceslices(json.dumps({"apiVersion": "v1", "kind": "List", "items": slices}))
    report = run_trial(catalog, offerings, devices, f"sandbox {plan.name}")
    raw = probe.devices_by_key(slices)
    rows = []
    create_all(toolbox, sandbox, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
    try:
        for index, (offering, tried) in enumerate(zip(offerings, report.offerings, strict=True)):
            device_class = probe.serving_class(plan, offering)
            row = TrialRow(offering.name, device_class, sorted(f"{d.node}/{d.name}" for d in tried.devices))
            create_all(toolbox, sandbox, _objects(index, offering, device_class))
            pod = probe.wait_pods(toolbox, sandbox, 1, NAMESPACE)[f"trial-{index}"]
            claims = probe.get_json(toolbox, sandbox, "resourceclaims", "-n", NAMESPACE)["items"]
            for claim in claims:
                for result in claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", []):
                    node = pod.get("spec", {}).get("nodeName", "")
                    row.allocated.append(f"{node}/{result['device']}")
                    row.described.append(
                        probe.describe_device(raw.get((result["driver"], result["pool"], result["device"]), {}))
                    )
            if not row.allocated:
                conditions = [c.get("message", "") for c in pod.get("status", {}).get("conditions", [])]
                row.pending = (conditions or ["not decided within the wait"])[-1]
            rows.append(row)
            kubectl(
                toolbox,
                sandbox,
                "delete",
                "pod",
                f"trial-{index}",
                "-n",
                NAMESPACE,
                "--grace-period=0",
                "--wait=true",
            )
    finally:
        with interrupts.deferred():
            interrupts.run([str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "delete",
                            "namespace", NAMESPACE, "--wait=true", "--timeout=60s"])  # fmt: skip
    return report, rows


def as_text(report: TrialReport, rows: list[TrialRow]) -> str:
    lines = [("offering", "class", "allocated by the scheduler", "offline trial", "agrees")]
    for row in rows:
        got = (
            "; ".join(f"{a} ({d})" for a, d in zip(row.allocated, row.described, strict=True))
            or f"Pending: {row.pending[:80]}"
        )
        lines.append(
            (row.offering, row.device_class, got, f"{len(row.predicted)} devices", "yes" if row.agrees else "NO")
        )
    return render_trial(report) + "\n\n" + table(lines, pad_last=False)


def as_json(report: TrialReport, rows: list[TrialRow]) -> str:
    return json.dumps(
        {"offline": trial_as_dict(report), "sandbox": [{**asdict(r), "agrees": r.agrees} for r in rows]},
        indent=2,
        sort_keys=True,
    )
