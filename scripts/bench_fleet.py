"""The benchmark's synthetic fleet (scripts/benchmark.py): a catalog derived from the product table and clusters of
one shape, and the edits the edit and `changed` goals make to it."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

EDIT_FLEET_SIZE = 1000  # the edit and `changed` goals edit a fleet of this many clusters, synthesized before
EDITED_CLUSTER = 7  # the one-cluster edit changes this cluster's kubeconfig context
EDITED_OFFERING_PRODUCT = "a10g"  # the catalog edit changes this product's offering, which every tenth serves

OFFERINGS_PER_CLUSTER, POOLS_PER_CLUSTER, NODES_PER_POOL, GPUS_PER_NODE = 20, 4, 8, 8
KUBERNETES_VERSION = "1.36"
# Short names in extended resource names, as the example catalog spells them (nvidia.com/a100, .../h100).
SHORT_NAMES: Mapping[str, str] = {
    **{k: k for k in ("a10g", "l4", "l40s", "a30", "a100-80gb", "h100-nvl", "b200")},
    **{"a100-40gb": "a100", "h100-80gb": "h100", "h200-141gb": "h200"},
}
MIG_OFFERING_PRODUCTS = ("a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb")
MIG_POOL_PRODUCTS = ("a100-40gb", "h100-80gb", "h200-141gb")  # A100-80GB slices are in no benchmark cluster
ALIASED_PRODUCT = "a100-40gb"  # legacy device-plugin names, as the example catalog has them
MIG_CONFIG_NAME = "themelio-mixed"


def _spelling(profile: str) -> str:
    return profile.replace("+", ".")


def _component(text: str) -> str:
    return "gpu_" + re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def whole_offering_name(product: str) -> str:
    return f"nvidia.com/{SHORT_NAMES[product]}"


def mig_offering_name(product: str, profile: str) -> str:
    return f"nvidia.com/{SHORT_NAMES[product]}-mig-{_spelling(profile)}"


def _products() -> Mapping[str, Any]:
    from themelio_gpu.inputs.catalog.products import PRODUCTS

    return PRODUCTS


def synthetic_catalog() -> dict[str, Any]:
    """A catalog in the example's shape with every offering derived from the product table (39 entries)."""
    offerings: dict[str, Any] = {}
    for key, product in _products().items():
        offerings[whole_offering_name(key)] = entry = {
            "deviceClass": f"{key}.gpu.themelio.io",
            "product": key,
            "displayName": product.display_name,
            "description": f"One whole {product.display_name}.",
            "quota": {"waldurComponent": _component(SHORT_NAMES[key])},
            "kubeflow": {"uiName": product.display_name},
        }
        if product.memory_gib >= 79:  # what GPUs of 80 GB and more publish
            entry["constraints"] = {"minMemory": f"{int(product.memory_gib)}Gi", "minDriverVersion": "570.0.0"}
    for key in MIG_OFFERING_PRODUCTS:
        product = _products()[key]
        for profile in product.mig_profiles:
            offerings[mig_offering_name(key, profile)] = entry = {
                "deviceClass": f"{key}-mig-{_spelling(profile)}.gpu.themelio.io",
                "product": key,
                "migProfile": profile,
                "displayName": f"{product.display_name} MIG {profile}",
                "description": f"A {profile} MIG slice of an {product.display_name}.",
                "quota": {"waldurComponent": _component(f"{SHORT_NAMES[key]}_mig_{profile}"), "unit": "slice"},
                "kubeflow": {"uiName": f"{product.display_name} MIG {profile}"},
            }
            if key == ALIASED_PRODUCT:
                legacy = _spelling(profile)
                entry["aliases"] = [
                    {"name": f"nvidia.com/mig-{legacy}", "deviceClass": f"legacy-mig-{legacy}.gpu.themelio.io"}
                ]
    offerings["nvidia.com/gpu"] = {
        "servedBy": "dra-driver-chart",
        "displayName": "Any NVIDIA GPU (legacy)",
        "description": "Any whole GPU, served by the DRA driver chart's own class.",
        "quota": {"waldurComponent": "gpu"},
        "lifecycle": "deprecated",
    }
    return {"offerings": offerings}


def cluster_name(index: int) -> str:
    return f"bench-{index + 1:04d}"


def whole_product(index: int) -> str:
    """The product of cluster `index`'s whole-GPU pool (rotating through the product table)."""
    return list(_products())[index % len(_products())]


def synthetic_cluster(index: int) -> dict[str, Any]:
    """Cluster `index` (0-based): 20 offerings on 4 static pools of 8 nodes, Kubernetes 1.36, local backend.

    One whole-GPU pool (its product rotates, so the counts stay the same) serving its product and the
    chart-served nvidia.com/gpu, and three MIG pools whose custom MIG Manager config lays out six profiles.
    """
    name, whole = cluster_name(index), whole_product(index)

    def pool(pool_name: str, product: str, **more: Any) -> dict[str, Any]:
        nodes = [f"{name}-{pool_name}-{n:02d}" for n in range(1, NODES_PER_POOL + 1)]
        return {"name": pool_name, "product": product, "gpusPerNode": GPUS_PER_NODE, **more} | {
            "provisioning": {"static": {"nodes": nodes}}
        }

    pools = [pool(f"whole-{whole}", whole)]
    offerings = [whole_offering_name(whole), "nvidia.com/gpu"]
    for product in MIG_POOL_PRODUCTS:
        profiles = [p for p in _products()[product].mig_profiles if "+" not in p]
        assert len(profiles) == 6, (product, profiles)
        # One custom config, different layouts on different GPUs of the node (mig-parted allows it).
        provides = {p: 2 if p == profiles[0] else 1 for p in profiles}
        pools.append(pool(f"mig-{product}", product, mig={"config": MIG_CONFIG_NAME, "provides": provides}))
        offerings.extend(mig_offering_name(product, p) for p in profiles)
    return {
        "name": name,
        "kubernetesVersion": KUBERNETES_VERSION,
        "access": {"kubeconfig": {"path": "~/.kube/config", "context": name}},
        "backend": {"type": "local"},
        "offerings": sorted(offerings),
        "nodePools": pools,
        "catalogConfigMap": {"namespace": "themelio-system"},
    }


def _dump(path: Path, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def write_fleet(folder: Path, clusters: int) -> tuple[Path, Path]:
    """Write the synthetic catalog and `clusters` cluster definitions; returns (catalog, stacks dir)."""
    (folder / "stacks").mkdir(parents=True, exist_ok=True)
    _dump(folder / "gpu-catalog.yaml", synthetic_catalog())
    for index in range(clusters):
        _dump(folder / "stacks" / f"{cluster_name(index)}.yaml", synthetic_cluster(index))
    return folder / "gpu-catalog.yaml", folder / "stacks"


def edited_cluster(stacks: Path) -> tuple[Path, str]:
    """The one-cluster edit: cluster EDITED_CLUSTER's file with another kubeconfig context."""
    path = stacks / f"{cluster_name(EDITED_CLUSTER - 1)}.yaml"
    definition = yaml.safe_load(path.read_text(encoding="utf-8"))
    definition["access"]["kubeconfig"]["context"] += "-edited"
    return path, yaml.safe_dump(definition, sort_keys=False)


def edited_catalog(catalog: Path) -> tuple[Path, str]:
    """The catalog edit: the notebook form's name of one whole-GPU offering (every tenth cluster serves it)."""
    data = yaml.safe_load(catalog.read_text(encoding="utf-8"))
    data["offerings"][whole_offering_name(EDITED_OFFERING_PRODUCT)]["kubeflow"]["uiName"] += " (edited)"
    return catalog, yaml.safe_dump(data, sort_keys=False)


def catalog_edit_clusters() -> list[str]:
    return [cluster_name(i) for i in range(EDIT_FLEET_SIZE) if whole_product(i) == EDITED_OFFERING_PRODUCT]


@contextlib.contextmanager
def edited(edit: tuple[Path, str] | None) -> Iterator[None]:
    """The file of `edit` holds its text while the block runs, and its own text again after."""
    original = edit[0].read_text(encoding="utf-8") if edit else None
    try:
        if edit:
            edit[0].write_text(edit[1], encoding="utf-8")
        yield
    finally:
        if edit and original is not None:
            edit[0].write_text(original, encoding="utf-8")


def check_fleet(catalog: Path, stacks: Path, clusters: int) -> None:
    """Load the fleet as main.py does and check its shape; exits with every problem if it is invalid."""
    from themelio_gpu.inputs.problems import InputError
    from themelio_gpu.plan.fleet import load_fleet

    try:
        fleet = load_fleet(catalog, stacks)
    except InputError as error:
        raise SystemExit(f"the generated fleet is invalid:\n{error.render()}") from error
    if len(fleet.clusters) != clusters:
        raise SystemExit(f"expected {clusters} clusters, loaded {len(fleet.clusters)}")
    for plan in fleet.clusters:
        nodes = [len(p.provisioning.static.nodes) for p in plan.definition.node_pools if p.provisioning.static]
        shape = (len(plan.offerings), len(plan.pools), nodes)
        if shape != (OFFERINGS_PER_CLUSTER, POOLS_PER_CLUSTER, [NODES_PER_POOL] * POOLS_PER_CLUSTER):
            raise SystemExit(f"{plan.name}: unexpected shape (offerings, pools, nodes per pool) {shape}")
