"""`trial --sandbox CLUSTER`: the platform trial of the second seed, answered by the real scheduler.

The offline trial (`dryrun/trial.py`) says which devices each offering's class could be given, here on the
sandbox's own ResourceSlices. Then each offering is submitted the way the seed's recipes are: a
ResourceClaimTemplate of the DeviceClass the cluster has for the offering, and a pod claiming from it with
the offering's node selector and tolerations, one offering at a time, each after the claim of the one before
is gone (its device free again). The real kube-scheduler allocates a device to the pod's own claim (read from
`pod.status.resourceClaimStatuses`), or says why not. The two are compared both ways: every allocated device
must be one the offline trial predicts, and where the trial predicts devices on this idle cluster, the
scheduler must allocate one (a pod Pending beside a prediction is a disagreement, as is a pod not decided
within the wait).
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
from themelio_gpu.sandbox import attempts
from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.outcomes import Kind, pod_outcome
from themelio_gpu.sandbox.placement import Ask, offering_class
from themelio_gpu.sandbox.rest import Rest, path
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
    """The devices the scheduler allocated to the pod's own claims (`node/device`)."""
    described: list[str] = field(default_factory=list)
    pending: str = ""
    """Why the pod stays Pending (the scheduler's words), or that it was not decided within the wait."""
    claims: list[str] = field(default_factory=list)
    """The pod's own claims, as its status names them."""
    outcome: str = ""
    """The scheduler's answer: `landed`, `placement_pending` (no node fits), or another outcome (outcomes.py)."""

    @property
    def agrees(self) -> bool:
        """Both ways: what the scheduler allocated is predicted, and a prediction is allocated; a pod Pending for
        any reason but "no node fits" (or not decided) never agrees."""
        if not self.allocated:
            return not self.predicted and self.outcome == Kind.PLACEMENT_PENDING.name.lower()
        return set(self.allocated) <= set(self.predicted)


def _ask(plan: ClusterPlan, offering: ResolvedOffering) -> tuple[str, Ask]:
    device_class = offering_class(plan, offering)
    tolerations = tuple(t.model_dump(exclude_none=True) for t in offering.tolerations)
    return device_class, Ask({}, device_class, offering.node_selector, tolerations)


def run(
    catalog: Catalog, plan: ClusterPlan, offerings: list[ResolvedOffering], sandbox: Sandbox, toolbox: Toolbox
) -> tuple[TrialReport, list[TrialRow]]:
    """The offline trial on the sandbox's ResourceSlices, and each offering's real allocation beside it."""
    api = Rest(sandbox.kubeconfig)
    slices = attempts.dra_items(api, "ResourceSlice")
    if not slices:
        raise SandboxError(f"sandbox {plan.name} publishes no ResourceSlices: a trial needs DRA pools")
    devices = parse_resourceslices(json.dumps({"apiVersion": "v1", "kind": "List", "items": slices}))
    report = run_trial(catalog, offerings, devices, f"sandbox {plan.name}")
    raw = attempts.devices_by_key(slices)
    rows = []
    api.fresh_namespace(NAMESPACE)
    try:
        for index, (offering, tried) in enumerate(zip(offerings, report.offerings, strict=True)):
            device_class, ask = _ask(plan, offering)
            row = TrialRow(offering.name, device_class, sorted(f"{d.node}/{d.name}" for d in tried.devices))
            rows.append(row)
            _try(api, sandbox, f"trial-{index}", ask, row, raw)
    finally:
        with interrupts.deferred():
            api.delete_namespace(NAMESPACE)
    return report, rows


def _try(
    api: Rest,
    sandbox: Sandbox,
    name: str,
    ask: Ask,
    row: TrialRow,
    raw: dict[attempts.DeviceKey, dict[str, Any]],
) -> None:
    api.create_all(attempts.pod_objects(name, NAMESPACE, ask))
    pod = attempts.wait_decided(api, NAMESPACE, [name]).get(name)
    if pod is None:
        raise SandboxError(f"trial pod {name} ({row.offering}) vanished before the scheduler decided it")
    outcome = pod_outcome(pod, attempts.events(api, NAMESPACE), attempts.pool_of(sandbox))
    row.claims = attempts.claim_names(pod)
    row.outcome = outcome.kind.name.lower()
    node = pod.get("spec", {}).get("nodeName", "")
    if outcome.kind is Kind.LANDED:
        for claim_name in row.claims:
            claim = api.get(path("ResourceClaim", NAMESPACE, claim_name))
            for _, key in attempts.allocation(claim):
                row.allocated.append(f"{node}/{key[2]}")
                row.described.append(attempts.describe_device(raw.get(key, {})))
        if not row.allocated:
            row.pending = "bound, but its claims have no allocated device"
    else:
        row.pending = outcome.kind.value + (f": {outcome.reason}" if outcome.reason else "")
    api.delete("Pod", NAMESPACE, name)
    left = attempts.wait_gone(api, NAMESPACE, "ResourceClaim", row.claims)
    if left:
        raise SandboxError(f"the claims of trial pod {name} were not removed within the wait: {', '.join(left)}")
    api.delete("ResourceClaimTemplate", NAMESPACE, name)


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
