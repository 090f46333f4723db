"""Quotas that hold: judged by an independent model of Kubernetes' quota evaluation (tests/quota_model.py).

For the fixture fleets under tests/fixtures/fleets/quota-*/ (migration aliases, the chart-served nvidia.com/gpu, a
catalog class replacing it, an alias served by the chart, MIG, several products, device-plugin pools,
ComputeDomains, the 25.x chart, capability offerings overlapping product offerings and a product declared
in the catalog), and grants drawn by hypothesis: no way of asking for a device yields more
devices of an offering than granted, and the grant itself is usable.
"""

from __future__ import annotations

import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.builders import fleet_of
from tests.conftest import FIXTURES
from tests.quota_model import CHART_CLASSES, ClusterModel, Route, admits, most_devices, unlimited_routes
from tests.requirements import binary, shared_path
from themelio_gpu.inputs.problems import InputError
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.plan.quota import grant_notes, plan_quota, resolve_grants

QUOTA_FLEETS = FIXTURES / "fleets"
QUOTA_FLEET_NAMES = ("chart-gpu", "catalog-gpu", "chart-alias", "capability")


@cache
def fleet(name: str) -> Fleet:
    folder = QUOTA_FLEETS / f"quota-{name}"
    return load_fleet(folder / "catalog" / "gpu-catalog.yaml", folder / "stacks")


def all_clusters() -> list[ClusterPlan]:
    return [plan for name in QUOTA_FLEET_NAMES for plan in fleet(name).clusters]


@cache
def model_of(fleet_name: str, cluster: str) -> tuple[ClusterModel, list[Route]]:
    plan = fleet(fleet_name).cluster(cluster)
    assert plan is not None
    model = ClusterModel.of(plan)
    return model, model.routes()


CLUSTERS = [(name, plan.name) for name in QUOTA_FLEET_NAMES for plan in fleet(name).clusters]


def servable_names(plan: ClusterPlan) -> list[str]:
    return sorted(n for o in plan.offerings for n in o.advertised_names(plan.definition.serve_migration_aliases))


def owner(plan: ClusterPlan) -> dict[str, str]:
    return {n: o.name for o in plan.offerings for n in o.advertised_names(plan.definition.serve_migration_aliases)}


def judge(fleet_name: str, cluster: str, hard: dict[str, str], grants: dict[str, int]) -> None:
    """The model's verdict on a namespace's quota; `grants` maps resource names to their counts."""
    plan = fleet(fleet_name).cluster(cluster)
    assert plan is not None
    model, routes = model_of(fleet_name, cluster)
    judge_plan(plan, model, routes, hard, grants)


def judge_plan(
    plan: ClusterPlan, model: ClusterModel, routes: list[Route], hard: dict[str, str], grants: dict[str, int]
) -> None:
    cluster = plan.name
    units = model.offering_units()
    own: dict[str, int] = {}
    for name, count in grants.items():
        own[owner(plan)[name]] = own.get(owner(plan)[name], 0) + count
    gpus = model.gpu_units()
    # Nothing that reaches a GPU is unlimited (ComputeDomain channels and daemons are no GPU).
    open_routes = unlimited_routes([r for r in routes if r.units & gpus], hard)
    assert not open_routes, f"{cluster}: unlimited: {open_routes}"
    # GPUs no offering sells are 0, but for what a granted name's own routes reach (the device plugin's
    # nvidia.com/gpu on a pool of another product).
    unsold = gpus - frozenset().union(*units.values())
    reachable = sum(
        count
        for name, count in grants.items()
        if any(r.units & unsold for r in routes if r.label.startswith(f"pod {name} -> "))
    )
    assert most_devices(routes, unsold, hard) <= reachable, f"{cluster}: GPUs no offering sells are reachable"
    for offering, mine in units.items():
        # Its own grant, plus grants of offerings that select the same devices (the any-GPU pool).
        bound = own.get(offering, 0) + sum(
            count for other, count in own.items() if other != offering and units[other] & mine
        )
        reach = most_devices(routes, mine, hard)
        assert reach <= bound, f"{cluster}: {offering} reachable {reach} > granted {bound} under {hard}"
    for name, count in grants.items():
        by_name = [r for r in routes if r.label.startswith(f"pod {name} -> ")]
        assert any(admits(r, count, hard) for r in by_name), f"{cluster}: the grant {name}={count} is not usable"


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_no_request_path_yields_more_than_granted(data: st.DataObject) -> None:
    fleet_name, cluster = data.draw(st.sampled_from(CLUSTERS))
    plan = fleet(fleet_name).cluster(cluster)
    assert plan is not None
    names = servable_names(plan)
    requested = data.draw(
        st.lists(
            st.tuples(st.sampled_from(names), st.integers(0, 9)), unique_by=lambda t: t[0], max_size=len(names)
        )
    )
    quota = plan_quota(plan)
    grants, problems = resolve_grants(quota, plan, requested)
    for _, message in problems:
        # Refused only where a grant could not be honest: nothing serves the name, or it reaches other GPUs.
        assert "nothing in cluster" in message or "cannot hold a grant" in message, message
    judge(fleet_name, cluster, quota.hard(grants), grants)


@pytest.mark.parametrize(("fleet_name", "cluster"), CLUSTERS)
def test_a_namespace_without_grants_gets_no_gpu(fleet_name: str, cluster: str) -> None:
    plan = fleet(fleet_name).cluster(cluster)
    assert plan is not None
    hard = plan_quota(plan).hard({})
    assert set(hard.values()) == {"0"}
    judge(fleet_name, cluster, hard, {})


@pytest.mark.parametrize(("fleet_name", "cluster"), CLUSTERS)
def test_every_key_is_needed(fleet_name: str, cluster: str) -> None:
    """The smallest set: with every grantable name granted, dropping any one key opens a way around it."""
    plan = fleet(fleet_name).cluster(cluster)
    assert plan is not None
    quota = plan_quota(plan)
    grants = dict.fromkeys(quota.grants, 3)
    hard = quota.hard(grants)
    for key in hard:
        without = {k: v for k, v in hard.items() if k != key}
        with pytest.raises(AssertionError):
            judge(fleet_name, cluster, without, grants)


def test_the_old_quota_left_every_other_gpu_open() -> None:
    """What `catalog quota --namespace team-a nvidia.com/a100=4` used to emit, judged by the model."""
    model, routes = model_of("chart-gpu", "gpu-east")
    hard = {"requests.nvidia.com/a100": "4"}
    units = model.offering_units()
    assert most_devices(routes, units["nvidia.com/a100-mig-1g.5gb"], hard) == float("inf")
    assert "ResourceClaim mig.nvidia.com" in unlimited_routes(routes, hard)
    # Even the A100s: a ResourceClaim of its class, or of gpu.nvidia.com, is charged nothing listed.
    assert most_devices(routes, units["nvidia.com/a100"], hard) == float("inf")


def test_migration_alias_and_offering_share_one_grant() -> None:
    plan = fleet("chart-gpu").cluster("gpu-east")
    assert plan is not None
    quota = plan_quota(plan)
    # The grant sits on the name the cluster migrates from; the new name is 0.
    grants, problems = resolve_grants(quota, plan, [("nvidia.com/a100-mig-1g.5gb", 5)])
    assert not problems
    assert grants == {"nvidia.com/mig-1g.5gb": 5}
    hard = quota.hard(grants)
    assert hard["requests.nvidia.com/mig-1g.5gb"] == "5"
    assert hard["requests.nvidia.com/a100-mig-1g.5gb"] == "0"
    # Naming both splits it: 2 on the old name, 3 on the new one, 5 devices in all.
    grants, _ = resolve_grants(quota, plan, [("nvidia.com/mig-1g.5gb", 2), ("nvidia.com/a100-mig-1g.5gb", 3)])
    model, routes = model_of("chart-gpu", "gpu-east")
    units = model.offering_units()["nvidia.com/a100-mig-1g.5gb"]
    assert most_devices(routes, units, quota.hard(grants)) == 5
    judge("chart-gpu", "gpu-east", quota.hard(grants), grants)
    # After the migration the grant sits on the offering's own name.
    west = fleet("chart-gpu").cluster("west")
    assert west is not None
    assert plan_quota(west).grant_names["nvidia.com/h100"] == "nvidia.com/h100"


def test_the_any_gpu_pool_is_a_pool_of_its_own() -> None:
    """nvidia.com/gpu from the chart takes any whole GPU: a grant of it adds to what a product can reach."""
    quota_plan = fleet("chart-gpu").cluster("gpu-east")
    assert quota_plan is not None
    quota = plan_quota(quota_plan)
    model, routes = model_of("chart-gpu", "gpu-east")
    a100 = model.offering_units()["nvidia.com/a100"]
    assert most_devices(routes, a100, quota.hard({"nvidia.com/a100": 4})) == 4
    assert most_devices(routes, a100, quota.hard({"nvidia.com/a100": 4, "nvidia.com/gpu": 2})) == 6
    assert quota.reach({"nvidia.com/a100": 4, "nvidia.com/gpu": 2})["nvidia.com/a100"] == 6


def test_a_catalog_class_for_nvidia_gpu_closes_the_operators_any_gpu_class() -> None:
    plan = fleet("catalog-gpu").cluster("replaced")
    assert plan is not None
    hard = plan_quota(plan).hard({"nvidia.com/gpu": 4})
    # The GPU Operator's gpu.nvidia.com maps no name but selects every whole GPU: its own counter is 0.
    assert hard["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "0"
    model, routes = model_of("catalog-gpu", "replaced")
    assert most_devices(routes, model.offering_units()["nvidia.com/a100"], hard) == 0


def test_an_alias_served_by_the_chart_cannot_carry_a_product_grant() -> None:
    plan = fleet("chart-alias").cluster("dra")
    assert plan is not None
    quota = plan_quota(plan)
    grants, problems = resolve_grants(quota, plan, [("nvidia.com/gpu", 2)])
    assert grants == {}
    assert problems == [
        (
            "nvidia.com/gpu",
            "nvidia.com/gpu reaches more than NVIDIA A10G in cluster dra (class gpu.nvidia.com (nvidia.com/gpu, "
            "deviceclass.resource.kubernetes.io/gpu.nvidia.com, ResourceClaims) selects other GPUs too), so it "
            "cannot hold a grant of nvidia.com/a10g; grant nvidia.com/a10g",
        )
    ]
    # Where the device plugin serves the old name for A10Gs only, the grant sits there while migrating.
    mixed = fleet("chart-alias").cluster("mixed")
    assert mixed is not None
    assert plan_quota(mixed).grant_names["nvidia.com/a10g"] == "nvidia.com/gpu"


def test_compute_domain_classes_are_no_gpu_path() -> None:
    plan = fleet("chart-gpu").cluster("west")
    assert plan is not None
    quota = plan_quota(plan)
    assert [p.name for p in quota.not_gpu] == [
        "compute-domain-daemon.nvidia.com",
        "compute-domain-default-channel.nvidia.com",
    ]
    assert not any("compute-domain" in key for key in quota.keys)
    model, routes = model_of("chart-gpu", "west")
    gpus = frozenset().union(*model.offering_units().values())
    assert all(not (r.units & gpus) for r in routes if "compute-domain" in r.label)


def test_resolve_grants_messages() -> None:
    east = fleet("chart-gpu").cluster("gpu-east")
    west = fleet("chart-gpu").cluster("west")
    legacy = fleet("chart-gpu").cluster("legacy")
    assert east is not None and west is not None and legacy is not None
    _, problems = resolve_grants(plan_quota(east), east, [("nvidia.com/h100", 1), ("nvidia.com/a100", 1)])
    assert problems == [
        (
            "nvidia.com/h100",
            "cluster gpu-east serves no offering of that name; it serves: nvidia.com/a100, "
            "nvidia.com/a100-mig-1g.5gb, nvidia.com/a100-mig-3g.20gb, nvidia.com/gpu, nvidia.com/mig-1g.5gb, "
            "nvidia.com/mig-3g.20gb",
        )
    ]
    _, problems = resolve_grants(plan_quota(west), west, [("nvidia.com/h100-80gb", 1)])
    assert problems == [
        (
            "nvidia.com/h100-80gb",
            "is a migration alias of nvidia.com/h100, which cluster west no longer serves "
            "(serveMigrationAliases: false); grant nvidia.com/h100",
        )
    ]
    _, problems = resolve_grants(
        plan_quota(legacy), legacy, [("nvidia.com/a100-mig-1g.5gb", 1), ("nvidia.com/mig-1g.5gb", 1)]
    )
    assert problems == [
        (
            "nvidia.com/a100-mig-1g.5gb",
            "nothing in cluster legacy serves nvidia.com/a100-mig-1g.5gb (no DeviceClass, no device-plugin "
            "pool); grant nvidia.com/mig-1g.5gb",
        )
    ]
    _, problems = resolve_grants(plan_quota(east), east, [("nvidia.com/a100", 1), ("nvidia.com/a100", 2)])
    assert problems == [("nvidia.com/a100", "listed twice")]


# --- The model's own footing ------------------------------------------------------------------------------


@pytest.mark.parametrize("chart", ["dra-driver-nvidia-gpu-0.4.1", "nvidia-dra-driver-gpu-25.12.0"])
def test_the_models_chart_classes_are_what_the_real_charts_render(chart: str) -> None:
    helm = binary("helm", "HELM")
    folder = shared_path("reference", "charts", chart)
    rendered = subprocess.run(
        [
            *(helm, "template", "dra", str(folder), "-n", "nvidia-dra-driver-gpu", "--kube-version", "1.34.2"),
            *("--set", "gpuResourcesEnabledOverride=true", "--set", "resourceApiVersion=resource.k8s.io/v1"),
            *("--set", "resources.computeDomains.enabled=true"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    classes = {
        d["metadata"]["name"]: d["spec"]
        for d in yaml.safe_load_all(rendered)
        if isinstance(d, dict) and d.get("kind") == "DeviceClass"
    }
    assert set(classes) == set(CHART_CLASSES)
    for name, (selector, _) in CHART_CLASSES.items():
        assert classes[name]["selectors"] == [{"cel": {"expression": selector}}]
        assert classes[name].get("extendedResourceName") == (
            "nvidia.com/gpu" if name == "gpu.nvidia.com" else None
        )


def test_the_claim_evaluator_model_matches_kubernetes_test_cases() -> None:
    """resource_claims_test.go: implicit-, explicit- and hybrid-extended-resource claims, and a user claim."""
    from tests.quota_model import claim_usage

    mapping = {"gpu": "example.com/gpu"}
    # The pod asked for the implicit name: the claim pays the explicit key (Kubernetes' "implicit" case).
    assert claim_usage([("gpu", 1)], mapping, True, {"deviceclass.resource.kubernetes.io/gpu": 1}) == {
        "gpu.deviceclass.resource.k8s.io/devices": 1,
        "requests.example.com/gpu": 1,
    }
    assert claim_usage([("gpu", 1)], mapping, True, {"example.com/gpu": 1}) == {
        "gpu.deviceclass.resource.k8s.io/devices": 1,
        "requests.deviceclass.resource.kubernetes.io/gpu": 1,
    }
    hybrid = claim_usage(
        [("gpu", 1), ("gpu", 1)],
        mapping,
        True,
        {"example.com/gpu": 1, "deviceclass.resource.kubernetes.io/gpu": 1},
    )
    assert hybrid == {
        "gpu.deviceclass.resource.k8s.io/devices": 2,
        "requests.deviceclass.resource.kubernetes.io/gpu": 1,
        "requests.example.com/gpu": 1,
    }
    assert claim_usage([("gpu", 2)], mapping, False, {}) == {
        "gpu.deviceclass.resource.k8s.io/devices": 2,
        "requests.deviceclass.resource.kubernetes.io/gpu": 2,
        "requests.example.com/gpu": 2,
    }


# --- Clusters not in the fixtures: pools, device plugin, aliases, chart and ComputeDomains drawn at random ---

POOL_SHAPES: dict[str, dict[str, Any]] = {
    "a100-whole": {"product": "a100-40gb"},
    "a100-1g": {"product": "a100-40gb", "mig": {"profile": "1g.5gb"}},
    "a100-balanced": {"product": "a100-40gb", "mig": {"config": "all-balanced"}},
    "h100-whole": {"product": "h100-80gb"},
    "h100-1g": {"product": "h100-80gb", "mig": {"profile": "1g.10gb"}},
    "a10g": {"product": "a10g"},
    "l4": {"product": "l4"},
}


def _provides(pool: dict[str, Any], product: str | None, profile: str | None, names: list[str]) -> bool:
    if product is not None and pool["product"] != product:
        return False
    mig = pool.get("mig")
    if profile is None:
        kind_ok = mig is None
    elif mig is None:
        kind_ok = False
    else:
        kind_ok = mig.get("profile") == profile or (
            mig.get("config") == "all-balanced" and profile in ("1g.5gb", "3g.20gb")
        )
    plugin_name = "nvidia.com/gpu" if profile is None else f"nvidia.com/mig-{profile}"
    return kind_ok and (pool["dra"] or plugin_name in names)


@settings(max_examples=80, deadline=None)
@given(
    shapes=st.lists(st.sampled_from(sorted(POOL_SHAPES)), min_size=1, max_size=4, unique=True),
    dra=st.lists(st.booleans(), min_size=4, max_size=4),
    aliases=st.booleans(),
    chart=st.sampled_from([("dra-driver-nvidia-gpu", "0.4.1"), ("nvidia-dra-driver-gpu", "25.12.0")]),
    compute_domains=st.booleans(),
    counts=st.lists(st.integers(0, 5), min_size=12, max_size=12),
)
def test_random_clusters_hold_too(
    shapes: list[str],
    dra: list[bool],
    aliases: bool,
    chart: tuple[str, str],
    compute_domains: bool,
    counts: list[int],
) -> None:
    catalog = yaml.safe_load((QUOTA_FLEETS / "quota-chart-gpu" / "catalog" / "gpu-catalog.yaml").read_text())
    pools = [
        {
            **POOL_SHAPES[s],
            "name": s,
            "gpusPerNode": 4,
            "dra": d,
            "provisioning": {"static": {"nodes": [f"n-{s}"]}},
        }
        for s, d in zip(shapes, dra, strict=False)
    ]
    offerings = []
    for name, entry in catalog["offerings"].items():
        names = [name, *(a["name"] for a in entry.get("aliases", []) if aliases)]
        if any(_provides(p, entry.get("product"), entry.get("migProfile"), names) for p in pools):
            offerings.append(name)
    assume(offerings)
    definition = {
        "name": "random",
        "kubernetesVersion": "1.36",
        "access": {"kubeconfig": {"path": "~/.kube/config", "context": "random"}},
        "backend": {"type": "local"},
        "offerings": offerings,
        "serveMigrationAliases": aliases,
        "nodePools": pools,
        "draDriver": {"chart": chart[0], "version": chart[1], "computeDomains": compute_domains},
    }
    with tempfile.TemporaryDirectory() as tmp:
        try:
            plan = fleet_of(Path(tmp), definition, catalog=catalog).clusters[0]
        except InputError:
            assume(False)
            return
    quota = plan_quota(plan)
    requested = list(zip(servable_names(plan), counts, strict=False))
    grants, _ = resolve_grants(quota, plan, requested)
    model = ClusterModel.of(plan)
    judge_plan(plan, model, model.routes(), quota.hard(grants), grants)


def test_overlapping_offerings_each_keep_their_own_counter() -> None:
    """`overlaps: allowed`: a device can be taken through two grants, and the grants add up on it.

    README "Overlapping offerings and quotas": each offering's grant sits on its own name and no key counts
    both, so a namespace granted 4 A100 80GB and 4 of "any GPU with 48 GiB" can hold 8 A100 80GB.
    """
    plan = fleet("capability").cluster("overlap")
    assert plan is not None
    quota = plan_quota(plan)
    model, routes = model_of("capability", "overlap")
    units = model.offering_units()
    a100, big, evaluation = (
        units["nvidia.com/a100-80gb"],
        units["nvidia.com/gpu-48gb"],
        units["nvidia.com/gpu-eval"],
    )
    # The model's own CEL evaluation: the capability class selects the A100 80GB and the catalog's product.
    assert a100 < big and any(u.pool == "any-rtx-pro-6000" for u in big)
    alone = quota.hard({"nvidia.com/a100-80gb": 4})
    assert most_devices(routes, a100, alone) == 4  # without a capability grant the product grant is exact
    assert most_devices(routes, big, alone) == 4
    both = {"nvidia.com/a100-80gb": 4, "nvidia.com/gpu-48gb": 4}
    hard = quota.hard(both)
    assert hard["requests.nvidia.com/a100-80gb"] == "4" and hard["requests.nvidia.com/gpu-48gb"] == "4"
    assert most_devices(routes, a100, hard) == 8
    assert most_devices(routes, big, hard) == 8
    assert most_devices(routes, evaluation, hard) == 8  # Ampere A100s and Blackwell RTX PRO 6000s
    reach = quota.reach(both)
    assert (reach["nvidia.com/a100-80gb"], reach["nvidia.com/gpu-48gb"], reach["nvidia.com/gpu-eval"]) == (8, 8, 8)
    assert grant_notes(quota, plan, both) == [
        "nvidia.com/a100-80gb: this namespace can hold up to 8 of its devices (4 granted, plus "
        "nvidia.com/gpu-48gb=4, which can be taken as them too)",
        "nvidia.com/gpu-eval: this namespace can hold up to 8 of its devices (0 granted, plus "
        "nvidia.com/a100-80gb=4, nvidia.com/gpu-48gb=4, which can be taken as them too)",
        "nvidia.com/rtx-pro-6000: this namespace can hold up to 4 of its devices (0 granted, plus "
        "nvidia.com/gpu-48gb=4, which can be taken as them too)",
    ]
    judge("capability", "overlap", hard, both)


def test_a_mig_capability_is_closed_like_any_mig_device() -> None:
    """A MIG capability selects MIG devices of several products; without its grant none is reachable by it."""
    plan = fleet("capability").cluster("overlap")
    assert plan is not None
    quota = plan_quota(plan)
    model, routes = model_of("capability", "overlap")
    units = model.offering_units()
    mig = units["nvidia.com/mig-40gb"]
    kinds = {u.kind for u in mig}
    assert {"mig 2g.48gb", "mig 4g.96gb", "mig 3g.40gb"} <= kinds and "mig 1g.24gb" not in kinds
    assert units["nvidia.com/rtx-pro-6000-mig-2g.48gb"] < mig
    grants = {"nvidia.com/rtx-pro-6000-mig-2g.48gb": 3}
    assert most_devices(routes, mig, quota.hard(grants)) == 3
    assert most_devices(routes, mig, quota.hard({**grants, "nvidia.com/mig-40gb": 2})) == 5
