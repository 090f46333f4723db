"""`sandbox probe`'s quota half: the real API server's quota admission asked about every path to a GPU.

For each offering a namespace is granted (`catalog quota`'s ResourceQuota, as `plan/quota.py` resolves it),
the grant's pod is admitted, one more is refused, and every other way to a device (another offering's name,
a class's implicit name, a ResourceClaim of any class, the driver chart's own classes) is refused by
admission, or admitted and given no device by the scheduler. Each attempt is compared with the quota model.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.k8s.dra import implicit_name
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.quota import ClusterQuotaPlan
from themelio_gpu.sandbox.cluster import KUBECTL, Sandbox, create_all
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.probe import WAIT_SECONDS, Row, decided, get_json, planned_rows, probe_pod
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.tables import table


@dataclass
class QuotaRow:
    namespace: str
    grant: str
    """The offering granted one device in the namespace (`catalog quota ... OFFERING=1`)."""
    path: str
    """What was tried: the grant itself, one more, another name, the implicit name, a ResourceClaim of a class."""
    admitted: bool
    """The pod or claim was admitted and (a pod) got a device."""
    expected: bool
    message: str = ""

    @property
    def agrees(self) -> bool:
        return self.admitted == self.expected


def _other_paths(
    plan: ClusterPlan, quota: ClusterQuotaPlan, granted: str
) -> list[tuple[str, dict[str, Any], bool]]:
    """Every other way a pod or a claim could ask for a device, and whether the quota model lets it through:
    each other name, and for each class its implicit name and a ResourceClaim of it (the stack's and the DRA
    driver's). A class the model knows selects no GPU (compute-domain channels and daemons) is no GPU path:
    the model expects it admitted."""
    paths: list[tuple[str, dict[str, Any], bool]] = []
    for name in plan.advertised_names:
        if name != granted:
            paths.append((f"pod asking for {name}", {"limits": {name: "1"}}, False))
    not_gpu = {path.name for path in quota.not_gpu}
    classes = sorted({c.name for c in plan.device_classes} | {c.name for c in plan.driver_classes})
    for device_class in classes:
        implicit = implicit_name(device_class)
        paths.append((f"pod asking for {implicit}", {"limits": {implicit: "1"}}, device_class in not_gpu))
        paths.append((f"ResourceClaim of {device_class}", {"claim": device_class}, device_class in not_gpu))
    return paths


def _create(toolbox: Toolbox, sandbox: Sandbox, document: dict[str, Any]) -> tuple[bool, str]:
    command = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "create", "-f", "-"]
    result = interrupts.run(command, input=json.dumps(document))
    return result.returncode == 0, (result.stderr or result.stdout).strip()


def _create_each(toolbox: Toolbox, sandbox: Sandbox, documents: list[dict[str, Any]]) -> dict[str, str]:
    """Create each object (kubectl sends one request per object and goes on after a refusal); returns the
    refusal message of each object the API server refused, by name."""
    command = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "create", "-f", "-"]
    result = interrupts.run(command, input=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}))
    refused = {}
    for line in result.stderr.splitlines():
        for document in documents:
            name = document["metadata"]["name"]
            if f'"{name}" is forbidden' in line or f'"{name}" is invalid' in line:
                refused[name] = line.split(": ", 2)[-1].strip()
    created = {line.split()[0].split("/")[-1] for line in result.stdout.splitlines() if line.endswith(" created")}
    for document in documents:
        name = document["metadata"]["name"]
        if name not in created and name not in refused:
            refused[name] = "not created: " + (result.stderr.strip().splitlines() or ["no answer"])[-1]
    return refused


def _quota_object(namespace: str, index: int, offering: ResolvedOffering, what: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": f"q-{index}", "namespace": namespace}
    if "claim" in what:
        request = {"name": "gpu", "exactly": {"deviceClassName": what["claim"], "count": 1}}
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": metadata,
                "spec": {"devices": {"requests": [request]}}}  # fmt: skip
    pod = probe_pod(index, Row("", 1, offering.name, []), offering)
    pod["metadata"] = metadata
    pod["spec"]["containers"][0]["resources"] = {"limits": what["limits"]}
    return pod


def quota_probe(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[QuotaRow]:
    """Per offering with pools: a namespace whose ResourceQuota is what `catalog quota` writes for a grant of
    one device. The grant is admitted (and scheduled), one more is refused by the API server's quota
    admission, and so is every other path to a device; anything else admitted is a hole in the quota model."""
    from themelio_gpu.plan.quota import plan_quota, resolve_grants
    from themelio_gpu.render.contracts import WALDUR_RESOURCE_QUOTA_NAME, resource_quota

    quota = plan_quota(plan)
    rows: list[QuotaRow] = []
    for number, (row, offering) in enumerate(
        r for r in planned_rows(plan) if r[0].count == 1 and r[0].expected_pools
    ):
        if row.name != offering.name or row.via:
            continue  # one namespace per offering; its aliases and implicit names are among the other paths
        namespace = f"themelio-quota-{number}"
        grants, problems = resolve_grants(quota, plan, [(offering.name, 1)])
        if problems:
            raise SandboxError(f"catalog quota {offering.name}=1: {problems}")
        hard = quota.hard(grants)
        granted = next(iter(grants))  # where `catalog quota` puts the grant: a migrating offering's legacy name
        objects = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            resource_quota(WALDUR_RESOURCE_QUOTA_NAME, namespace, hard, plan.names),
        ]
        create_all(toolbox, sandbox, objects)
        try:
            _wait_quota_ready(toolbox, sandbox, namespace)
            attempts = [
                (f"the grant ({granted})", {"limits": {granted: "1"}}, True),
                ("one more", {"limits": {granted: "1"}}, False),
            ]
            attempts += _other_paths(plan, quota, granted)
            # The grant first (and its claim charged), then every other attempt in one request per object.
            documents = [_quota_object(namespace, i, offering, what) for i, (_, what, _) in enumerate(attempts)]
            admitted, message = _create(toolbox, sandbox, documents[0])
            rows.append(
                QuotaRow(namespace, offering.name, attempts[0][0], admitted, True, "" if admitted else message)
            )
            if admitted:
                _wait_claim_charged(toolbox, sandbox, namespace)
            answers = _create_each(toolbox, sandbox, documents[1:])
            for (path, _, expected), document in zip(attempts[1:], documents[1:], strict=True):
                refusal = answers.get(document["metadata"]["name"])
                rows.append(QuotaRow(namespace, offering.name, path, refusal is None, expected, refusal or ""))
            _devices_past_admission(toolbox, sandbox, namespace, rows)
        finally:
            with interrupts.deferred():
                interrupts.run([str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "delete",
                                "namespace", namespace, "--wait=false"])  # fmt: skip
    return rows


def _devices_past_admission(toolbox: Toolbox, sandbox: Sandbox, namespace: str, rows: list[QuotaRow]) -> None:
    """A pod admitted on another path (an implicit class name is no quota key) is closed only if it gets no
    device: the claim the scheduler makes for it is charged to the class's keys, and refused there. Each such
    pod is given until the scheduler has decided it; one that is bound got a device past the quota."""
    ours = [row for row in rows if row.namespace == namespace]  # q-<n> is the namespace's n-th attempt
    pending = {
        f"q-{i}": row
        for i, row in enumerate(ours)
        if row.admitted and not row.expected and not row.path.startswith("ResourceClaim")
    }
    deadline = time.monotonic() + WAIT_SECONDS
    while pending and time.monotonic() < deadline:
        pods = {p["metadata"]["name"]: p for p in get_json(toolbox, sandbox, "pods", "-n", namespace)["items"]}
        for name in list(pending):
            pod = pods.get(name, {})
            if pod.get("spec", {}).get("nodeName"):
                pending.pop(name).message = f"admitted and bound to {pod['spec']['nodeName']}: it got a device"
            elif decided(pod):
                row = pending.pop(name)
                reason = [c.get("message", "") for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
                row.admitted = False  # no device: the quota holds where the scheduler's claim is charged
                row.message = "admitted, no device: " + (reason[-1] if reason else "Pending")
        time.sleep(0.5)
    for row in pending.values():
        row.message = "admitted and not decided by the scheduler within the wait"


def _wait_quota_ready(toolbox: Toolbox, sandbox: Sandbox, namespace: str) -> None:
    """Quota admission refuses nothing until the quota controller has written the quota's status."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        items = get_json(toolbox, sandbox, "resourcequota", "-n", namespace)["items"]
        if items and items[0].get("status", {}).get("hard"):
            return
        time.sleep(0.2)
    raise SandboxError(f"the ResourceQuota in {namespace} got no status in 30 s")


def _wait_claim_charged(toolbox: Toolbox, sandbox: Sandbox, namespace: str) -> None:
    """The grant's pod is bound and the claim the scheduler made for it exists (and is charged)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pod = get_json(toolbox, sandbox, "pod", "q-0", "-n", namespace)
        if pod.get("spec", {}).get("nodeName") and pod.get("status", {}).get("extendedResourceClaimStatus"):
            return
        if pod.get("spec", {}).get("nodeName"):  # the device-plugin path: no claim
            return
        time.sleep(0.2)


def quota_table(rows: list[QuotaRow]) -> str:
    lines = [("namespace", "grant", "tried", "API server", "model", "agrees")]
    for row in rows:
        answer = ("admitted" if row.admitted else "refused") + (": " + row.message[-70:] if row.message else "")
        lines.append((row.namespace, row.grant, row.path, answer, "admit" if row.expected else "refuse",
                      "yes" if row.agrees else "NO"))  # fmt: skip
    return table(lines)
