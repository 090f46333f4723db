"""Polyaxon scheduling presets for one cluster: one operation preset per offering a pool of it serves.

Checked against Polyaxon 2.18.0 (the `polyaxon` package: its Polyaxonfile schema, runPatch validation, the merge
of `polyaxon run -f <recipe> -f <preset>` and its Kubernetes converter; tests/test_upstream_contracts.py).
docs/consumers.md gives the rule each field follows. A preset is a Polyaxonfile operation with `isPreset: true`
and a `runPatch` for the run's pod and main container:

- `environment.nodeSelector`, `environment.tolerations`: the offering's placement, as the gpuLabel list and
  Kubeflow Notebooks 2.0 have it;
- `container.resources.limits`: one device on the offering's grant name in this cluster (the name its quotas
  grant, the old one while migration aliases are served). Only the limit: Kubernetes sets an extended
  resource's request to its limit, so a later file that sets the limit alone changes the count.

An offering that lands on a pool serving it with its own node selector and tolerations gets that preset. One
that lands only on reserved pools (a NoSchedule or NoExecute taint its tolerations do not tolerate) gets the
preset only together with the Kueue queue the cluster definition grants such a pool: `environment.labels`
carries `kueue.x-k8s.io/queue-name`, and Kueue adds the flavor's tolerations and pool label to the pods it
admits (render/kueue.py). Otherwise it is left out, with the reason, as the Kubeflow files leave out an
offering no notebook could land with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.catalog.model import Lifecycle
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.plan.kueue import KueuePlan, Queue, plan_kueue
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.quota import ClusterQuotaPlan, plan_quota
from themelio_gpu.render.contracts import offering_tolerations, why_not_on
from themelio_gpu.render.yaml_output import dump_yaml

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
"""The label Kueue reads on a Job to admit it through the LocalQueue of that name in the Job's namespace."""
PRESETS_FOLDER = "polyaxon-presets"
"""Under clusters/<cluster>/ of `catalog export`: <offering name>.yaml per preset (`nvidia.com/a100.yaml`)."""
LEFT_OUT_FILE = "left-out.txt"
"""In the presets folder, written only when an offering is left out: one `# <reason>` line each."""
DEVICES = 1
"""The count a preset asks for; a later file's `runPatch.container.resources.limits` overrides it."""


@dataclass(frozen=True)
class Preset:
    offering: ResolvedOffering
    resource_name: str
    """The name the preset asks for: the offering's grant name in this cluster."""
    queue: Queue | None
    """The Kueue queue that admits it to the reserved pools it needs; None when it lands by itself."""
    pools: tuple[str, ...]
    """The pools serving it that it lands on: by itself, or through the queue (after Kueue's flavor)."""
    notes: tuple[str, ...]

    @property
    def path(self) -> str:
        """Relative to the presets folder: the offering's name with `.yaml` (one folder per domain)."""
        return f"{self.offering.name}.yaml"

    def document(self) -> dict[str, Any]:
        environment: dict[str, Any] = {}
        if self.queue is not None:
            environment["labels"] = {QUEUE_NAME_LABEL: self.queue.name}
        if self.offering.node_selector:
            environment["nodeSelector"] = dict(self.offering.node_selector)
        tolerations = offering_tolerations(self.offering)
        if tolerations:
            environment["tolerations"] = tolerations
        run_patch: dict[str, Any] = {"container": {"resources": {"limits": {self.resource_name: DEVICES}}}}
        if environment:
            run_patch["environment"] = environment
        return {"kind": "operation", "isPreset": True, "runPatch": run_patch}

    def text(self) -> str:
        return "".join(f"# {line}\n" for line in self.notes) + dump_yaml(self.document())


@dataclass(frozen=True)
class PolyaxonPresets:
    presets: tuple[Preset, ...]
    left_out: tuple[str, ...]
    """One sentence per offering of the cluster that gets no preset, saying why."""

    def files(self) -> dict[str, str]:
        """Path under clusters/<cluster>/ -> text."""
        files = {f"{PRESETS_FOLDER}/{p.path}": p.text() for p in self.presets}
        if self.left_out:
            files[f"{PRESETS_FOLDER}/{LEFT_OUT_FILE}"] = "".join(f"# {line}\n" for line in self.left_out)
        return files


def _selects(offering: ResolvedOffering, pool: PoolContract) -> bool:
    return all(pool.labels.get(k) == v for k, v in offering.node_selector.items())


def _namespaces(queue: Queue) -> str:
    return ", ".join(queue.namespaces or ())


def _queue_routes(
    offering: ResolvedOffering, name: str, serving: list[PoolContract], kueue: KueuePlan
) -> tuple[dict[str, tuple[Queue, list[str]]], list[str]]:
    """Queue -> (queue, the reserved pools serving the offering that Kueue admits its name to there), and why
    the other granted pools serving it admit nothing of it."""
    routes: dict[str, tuple[Queue, list[str]]] = {}
    why_not: list[str] = []
    by_pool = {f.pools[0].name: (q, f) for q in kueue.queues if q.namespaces is not None for f in q.flavors}
    for pool in serving:
        if pool.name not in by_pool:
            continue
        queue, flavor = by_pool[pool.name]
        if not _selects(offering, pool):
            continue  # its node selector keeps it off the pool whatever Kueue adds
        if name in kueue.counted[flavor.name]:
            routes.setdefault(queue.name, (queue, []))[1].append(pool.name)
        else:
            counted = ", ".join(sorted(kueue.counted[flavor.name])) or "no name"
            why_not.append(
                f"the Kueue queue {queue.name} grants pool {pool.name}, but Kueue counts its devices toward "
                f"{counted}, so it admits nothing of {name} there"
            )
    return routes, why_not


def _lifecycle_notes(offering: ResolvedOffering, name: str) -> list[str]:
    notes = []
    if offering.lifecycle is Lifecycle.deprecated:
        replaced = f"; it is replaced by {offering.replaced_by}" if offering.replaced_by else ""
        notes.append(f"{offering.name} is deprecated in the catalog{replaced}")
    if name != offering.name:
        notes.append(
            f"asks for {name}: this cluster's quotas grant {offering.name} on that name while migration aliases "
            "are served"
        )
    return notes


def polyaxon_presets(plan: ClusterPlan, quota: ClusterQuotaPlan | None = None) -> PolyaxonPresets:
    """The cluster's presets, in the order of its offerings, and the offerings left out with the reason."""
    quota = quota or plan_quota(plan)
    kueue = plan_kueue(plan, quota)
    pools = {p.name: p for p in plan.pools}
    presets: list[Preset] = []
    left_out: list[str] = []
    for offering in plan.offerings:
        serving = [pools[n] for n in plan.placements.get(offering.name, ())]
        if not serving:
            continue
        name = quota.grant_names.get(offering.name)
        if name is None:
            left_out.append(
                f"{offering.name} gets no Polyaxon preset: none of its names holds a grant on this cluster, so "
                "a request for it would be refused by its quotas"
            )
            continue
        reasons = {p.name: why_not_on(offering, p) for p in serving}
        direct = tuple(p.name for p in serving if reasons[p.name] is None)
        routes, why_not = _queue_routes(offering, name, serving, kueue)
        notes = _lifecycle_notes(offering, name)
        if direct:
            for queue, route_pools in routes.values():
                reserved = [p for p in route_pools if reasons[p] is not None]
                if reserved:
                    notes.append(
                        f"pool {', '.join(reserved)} also serves it, reserved for the Kueue queue {queue.name} "
                        f"(namespaces {_namespaces(queue)}): a run from those namespaces reaches it when a later "
                        f"file adds runPatch.environment.labels {QUEUE_NAME_LABEL}: {queue.name}"
                    )
            presets.append(Preset(offering, name, None, direct, tuple(notes)))
        elif len(routes) == 1:
            ((queue, route_pools),) = routes.values()
            notes.append(
                f"{offering.name} lands here only on reserved pools: Kueue admits this run through the queue "
                f"{queue.name} from the namespaces {_namespaces(queue)} to pool {', '.join(route_pools)}, adding the "
                "pool's tolerations and label; elsewhere the run stays suspended"
            )
            presets.append(Preset(offering, name, queue, tuple(route_pools), tuple(notes)))
        else:
            blocked = [r for r in reasons.values() if r is not None]
            if routes:
                blocked.append(
                    "it is reached only through the Kueue queues "
                    + ", ".join(f"{q.name} (namespaces {_namespaces(q)})" for q, _ in routes.values())
                    + f", and a preset names one queue: add environment.labels {QUEUE_NAME_LABEL}: <queue> to a "
                    "copy of the preset's placement"
                )
            else:
                blocked += why_not
                granted = {n for q in plan.definition.kueue.queues for n in q.pools}
                ungranted = [p.name for p in serving if p.reservations and p.name not in granted]
                if ungranted:
                    blocked.append(f"no kueue.queues entry grants pool {', '.join(ungranted)}")
            left_out.append(f"{offering.name} gets no Polyaxon preset: {'; '.join(blocked)}")
    return PolyaxonPresets(tuple(presets), tuple(left_out))


def preset_files(plan: ClusterPlan, quota: ClusterQuotaPlan | None = None) -> Mapping[str, str]:
    """What `catalog export` writes for Polyaxon under clusters/<cluster>/."""
    return polyaxon_presets(plan, quota).files()
