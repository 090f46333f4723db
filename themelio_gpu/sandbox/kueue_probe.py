"""`sandbox probe`'s Kueue rows: the Jobs of kueue_model.py submitted through Kueue's own controller
(components/kueue.py), one at a time, and what Kueue and the real scheduler did with each, beside the model.

The cluster's `kueue.yaml` (the file `catalog export` writes) is applied as a user applies it (`kubectl apply
-f`), after the namespaces its LocalQueues live in, with a LocalQueue `gpus` in the probe's namespace (the file
leaves those to the user); the probe waits for every ClusterQueue to be active. Each Job is created as users
create one: the queue label, no `suspend` (Kueue's webhook suspends it; the row says whether it did). Its answer
is Kueue's: the Workload's QuotaReserved and Admitted conditions and the flavor its admission assigned (or its
message why not), then, admitted, where the real scheduler placed the Job's pod, or why it stayed Pending. The Job
is then deleted (its Workload, pod and claims with it) before the next. At the end, everything the probe applied
is deleted again, the namespaces it created too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from themelio_gpu import interrupts
from themelio_gpu.outputs.consumer_files import cluster_contract_files
from themelio_gpu.plan.kueue import DEFAULT_QUEUE
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import attempts
from themelio_gpu.sandbox.cluster import KUBECTL, Sandbox
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.kueue_model import PROBE_NAMESPACE, Admission, PlannedJob, planned_jobs
from themelio_gpu.sandbox.outcomes import Kind, pod_outcome
from themelio_gpu.sandbox.rest import Rest, path
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.tables import table

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
WAIT_SECONDS = 60.0


@dataclass
class KueueRow:
    key: str
    namespace: str
    expected: Admission
    real: Admission | None = None
    suspended: bool = False
    """Kueue's mutating webhook suspended the Job as it was created."""
    node: str = ""
    added: list[str] = field(default_factory=list)
    """What the admitted pod carries that its Job did not ask for: Kueue's node labels and tolerations."""

    @property
    def agrees(self) -> bool:
        real, expected = self.real, self.expected
        if real is None or real.admitted != expected.admitted:
            return False
        if not real.admitted:
            return True
        if real.flavor != expected.flavor:
            return False
        return (
            set(real.pools) <= set(expected.pools)
            if real.pools and expected.pools
            else real.pools == expected.pools
        )


def _kubectl(toolbox: Toolbox, sandbox: Sandbox, *args: str, stdin: str | None = None) -> str:
    command = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), *args]
    result = interrupts.run(command, input=stdin) if stdin is not None else interrupts.run(command)
    if result.returncode != 0:
        raise SandboxError(f"kubectl {' '.join(args[:2])}: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def job_object(name: str, planned: PlannedJob) -> dict[str, Any]:
    """The Job as its users submit it: the queue's label, the offering's placement, the device in its limits."""
    ask = planned.ask
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "probe", "image": attempts.IMAGE, "resources": {"limits": {ask.name: str(ask.count)}}}
        ],
        "tolerations": [dict(t) for t in ask.tolerations],
    }
    if ask.selector:
        spec["nodeSelector"] = dict(ask.selector)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ask.namespace, "labels": {QUEUE_LABEL: ask.queue}},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": spec}},
    }


def _conditions(item: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in item.get("status", {}).get("conditions") or []}


def _workload_of(api: Rest, namespace: str, uid: str) -> dict[str, Any] | None:
    owned = [w for w in api.items("Workload", namespace) if _owned_by(w, uid)]
    return owned[0] if owned else None


def _decided(workload: Mapping[str, Any] | None) -> bool:
    conditions = _conditions(workload or {})
    admitted = conditions.get("Admitted", {}).get("status") == "True"
    return admitted or conditions.get("QuotaReserved", {}).get("status") == "False"


def _until(check: Any, seconds: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _added(job: Mapping[str, Any], pod: Mapping[str, Any]) -> list[str]:
    asked, got = job["spec"]["template"]["spec"], pod.get("spec", {})
    labels = {
        k: v for k, v in (got.get("nodeSelector") or {}).items() if (asked.get("nodeSelector") or {}).get(k) != v
    }
    tolerations = [t for t in got.get("tolerations") or [] if t not in asked.get("tolerations", [])]
    return [f"{k}={v}" for k, v in sorted(labels.items())] + [
        f"tolerates {t.get('key')}:{t.get('effect')}"
        for t in tolerations
        if "kubernetes.io/" not in t.get("key", "")
    ]


def submit(api: Rest, sandbox: Sandbox, name: str, planned: PlannedJob) -> KueueRow:
    """One Job through Kueue, read until Kueue and the scheduler have decided it, then deleted with what it owns."""
    namespace = planned.ask.namespace
    row = KueueRow(planned.key, namespace, planned.expected)
    refused = api.create(job_object(name, planned))
    if refused is not None:
        row.real = Admission(False, reason=f"refused at create: {refused}")
        return row
    try:
        job = api.get(path("Job", namespace, name))
        row.suspended = bool(job["spec"].get("suspend"))
        workload = _until(
            lambda: (w := _workload_of(api, namespace, job["metadata"]["uid"])) and _decided(w) and w
        )
        if not workload:
            row.real = Admission(False, reason=f"Kueue decided nothing within {WAIT_SECONDS:.0f} s")
            return row
        conditions = _conditions(workload)
        if conditions.get("Admitted", {}).get("status") != "True":
            row.real = Admission(False, reason=conditions.get("QuotaReserved", {}).get("message", ""))
            return row
        assignments = workload["status"]["admission"]["podSetAssignments"][0].get("flavors", {})
        flavor = str(assignments.get(planned.ask.name, ""))
        pods = _until(lambda: [p["metadata"]["name"] for p in api.items("Pod", namespace)
                               if p["metadata"].get("labels", {}).get(JOB_NAME_LABEL) == name])  # fmt: skip
        if not pods:
            row.real = Admission(True, flavor, reason="its Job made no pod within the wait")
            return row
        pod = attempts.wait_decided(api, namespace, pods[:1]).get(pods[0], {})
        events = [] if pod.get("spec", {}).get("nodeName") else attempts.events(api, namespace)
        outcome = pod_outcome(pod, events, attempts.pool_of(sandbox)) if pod else None
        row.added = _added(job, pod)
        if outcome is not None and outcome.kind is Kind.LANDED:
            row.node = outcome.reason
            row.real = Admission(True, flavor, outcome.pools)
        else:
            row.real = Admission(True, flavor, reason=outcome.describe() if outcome else "its pod vanished")
        return row
    finally:
        _delete_job(api, namespace, name)


def _owned_by(item: Mapping[str, Any], uid: str) -> bool:
    return any(o.get("uid") == uid for o in item["metadata"].get("ownerReferences") or [])


def _delete_job(api: Rest, namespace: str, name: str) -> None:
    """The Job, its Workload, its pod and the pod's claims, gone before the next Job (their quota and devices
    free again)."""
    uid = api.get(path("Job", namespace, name))["metadata"]["uid"]
    pods = [p for p in api.items("Pod", namespace) if p["metadata"].get("labels", {}).get(JOB_NAME_LABEL) == name]
    claims = [c for p in pods for c in attempts.claim_names(p)]
    api.delete("Job", namespace, name)
    for pod in pods:
        api.delete("Pod", namespace, pod["metadata"]["name"])

    def gone() -> bool:
        mine = [
            p for p in api.items("Pod", namespace) if p["metadata"].get("labels", {}).get(JOB_NAME_LABEL) == name
        ]
        return not mine and not [w for w in api.items("Workload", namespace) if _owned_by(w, uid)]

    if not _until(gone):
        raise SandboxError(f"Kueue probe Job {namespace}/{name}: its pod or Workload outlived the wait")
    attempts.wait_gone(api, namespace, "ResourceClaim", claims)


def _apply(toolbox: Toolbox, sandbox: Sandbox, api: Rest, text: str, namespaces: list[str]) -> list[str]:
    """The namespaces (those that are not there yet: returned), kueue.yaml, the probe's LocalQueue `gpus`; then
    until every ClusterQueue is active."""
    created = []
    for namespace in namespaces:
        refused = api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        if refused is None:
            created.append(namespace)
    _kubectl(toolbox, sandbox, "apply", "-f", "-", stdin=text)
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": DEFAULT_QUEUE, "namespace": PROBE_NAMESPACE}, "spec": {"clusterQueue": DEFAULT_QUEUE}}  # fmt: skip
    api.create_all([local])
    active = _until(
        lambda: all(_conditions(q).get("Active", {}).get("status") == "True" for q in api.items("ClusterQueue"))
    )
    if not active:
        inactive = [
            f"{q['metadata']['name']}: {_conditions(q).get('Active', {}).get('message', '')}"
            for q in api.items("ClusterQueue")
        ]
        raise SandboxError(f"Kueue's ClusterQueues are not active: {'; '.join(inactive)}")
    return created


def probe_kueue(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[KueueRow]:
    """Every planned Job, one at a time; what the probe applied is deleted at the end."""
    jobs = planned_jobs(plan)
    if not jobs or "kueue" not in sandbox.state():
        return []
    api = Rest(sandbox.kubeconfig)
    text = cluster_contract_files(plan)["kueue.yaml"]
    queue_namespaces = [q for q in {o["metadata"].get("namespace") for o in yaml.safe_load_all(text) if o} if q]
    namespaces = sorted({PROBE_NAMESPACE, *queue_namespaces})
    created: list[str] = []
    try:
        created = _apply(toolbox, sandbox, api, text, namespaces)
        return [submit(api, sandbox, f"kueue-probe-{i}", job) for i, job in enumerate(jobs)]
    finally:
        with interrupts.deferred():
            api.delete("LocalQueue", PROBE_NAMESPACE, DEFAULT_QUEUE)
            interrupts.run([str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "delete",
                            "--ignore-not-found", "--wait=true", "--timeout=60s", "-f", "-"], input=text)  # fmt: skip
            for namespace in created:
                api.delete("Namespace", None, namespace)


def as_dicts(rows: list[KueueRow]) -> list[dict[str, Any]]:
    def admission(found: Admission | None) -> dict[str, Any] | None:
        if found is None:
            return None
        return {
            "admitted": found.admitted,
            "flavor": found.flavor,
            "pools": list(found.pools),
            "reason": found.reason,
        }

    return [
        {"tried": r.key, "namespace": r.namespace, "kueue": admission(r.real), "model": admission(r.expected),
         "suspendedByWebhook": r.suspended, "node": r.node, "addedByKueue": r.added, "agrees": r.agrees}
        for r in rows
    ]  # fmt: skip


def as_table(rows: list[KueueRow]) -> str:
    header = ("Job (through Kueue)", "namespace", "Kueue's answer, then the scheduler's", "model", "agrees")
    lines = [header]
    for row in rows:
        answer = row.real.describe() if row.real else "not tried"
        if row.node:
            answer = f"{answer} ({row.node})"
        if row.added:
            answer += f"; Kueue added {', '.join(row.added)}"
        if row.real is not None and not row.suspended and row.real.admitted:
            answer += "; NOT suspended at create"
        lines.append(
            (row.key, row.namespace, answer[:160], row.expected.describe()[:90], "yes" if row.agrees else "NO")
        )
    return table(lines, pad_last=False)
