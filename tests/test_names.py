"""A fork's own names (the catalog's `names:`, docs/names.md): defaults as before, every name followed, none of
this project's names left in a fork's output, and each name checked as Kubernetes checks what it becomes.

The fleet tests/fixtures/fleets/own-names sets every name; CI runs the real charts (`make verify-fixtures`)
and real Terraform (`make terraform-check-fixtures`) on it like on every fixture fleet.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import PYDANTIC_WORDS, cluster, fleet_of, plan_of, problems_of
from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_STACKS, FIXTURES, ROOT
from tests.fakeapi import SCENARIOS, FakeApiServer
from themelio_gpu.cli import main
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.catalog.names import DEFAULT_NAMES, Names
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.live.preflight import run_preflight
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet

FLEET = FIXTURES / "fleets" / "own-names"
CATALOG = FLEET / "catalog" / "gpu-catalog.yaml"
STACKS = FLEET / "stacks"
OWN = Names(
    label_domain="gpu.acme.example",
    device_class_suffix="classes.acme.example",
    field_manager="acme-gpu-stacks",
    namespace="acme-gpu-system",
    name_prefix="acme-gpu",
)
# Every name of this project the output could carry, as a fork would grep for it.
DEFAULTS = ("themelio", "gpu.themelio.io", "themelio-gpu-stacks", "themelio-system", "themelio-gpu")


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return load_fleet(CATALOG, STACKS)


@pytest.fixture(scope="module")
def output(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fleet synthesized (`main.py`) and exported (`catalog export`), as a fork runs them."""
    from themelio_gpu.outputs.synth import synthesize

    out = tmp_path_factory.mktemp("own-names")
    synthesize(fleet, out / "synth", progress=None)
    assert (
        main(
            [
                "catalog",
                "export",
                "--catalog",
                str(CATALOG),
                "--stacks-dir",
                str(STACKS),
                "--out",
                str(out / "export"),
            ]
        )
        == 0
    )
    return out


def stack(output: Path, name: str) -> dict[str, Any]:
    return dict(json.loads((output / "synth" / "stacks" / name / "cdk.tf.json").read_text(encoding="utf-8")))


def field_managers(node: Any) -> Iterator[str]:
    """Every `field_manager` in a stack: a string (labels, taints) or `{name: ...}` (manifests)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "field_manager":
                yield value["name"] if isinstance(value, dict) else value
            else:
                yield from field_managers(value)
    elif isinstance(node, list):
        for item in node:
            yield from field_managers(item)


# --- Defaults --------------------------------------------------------------------------------------------


def test_a_catalog_without_names_has_this_projects_names() -> None:
    """The names every fleet had before the setting existed (the snapshots prove the bytes stay the same)."""
    problems = Problems()
    catalog = load_catalog(EXAMPLE_CATALOG, problems)
    assert catalog is not None and not problems
    names = catalog.names
    assert names == DEFAULT_NAMES
    assert (names.pool_label, names.offering_annotation, names.generic_gpu_class) == (
        "gpu.themelio.io/pool",
        "gpu.themelio.io/offering",
        "any-gpu.gpu.themelio.io",
    )
    assert (names.field_manager, names.namespace, names.config_map_name, names.closed_quota_name) == (
        "themelio-gpu-stacks",
        "themelio-system",
        "themelio-gpu-catalog",
        "themelio-gpu-closed",
    )


def test_the_class_suffix_follows_the_label_domain_unless_set() -> None:
    names = Names(label_domain="gpu.acme.example")
    assert names.generic_gpu_class == "any-gpu.gpu.acme.example"
    assert names.pool_label == "gpu.acme.example/pool"
    assert (names.field_manager, names.namespace) == (DEFAULT_NAMES.field_manager, DEFAULT_NAMES.namespace)


# --- The fixture fleet: every name followed, none of ours left ---------------------------------------------


def test_the_fleet_reads_its_names(fleet: Fleet) -> None:
    assert fleet.catalog.names == OWN
    assert all(plan.names == OWN for plan in fleet.clusters)


def test_no_name_of_this_project_is_left_in_the_output(output: Path) -> None:
    files = sorted(p for p in output.rglob("*") if p.is_file())
    assert any(p.name == "cdk.tf.json" for p in files) and any(p.name == "kueue.yaml" for p in files)
    leaks = {
        str(p.relative_to(output)): sorted({d for d in DEFAULTS if d in p.read_text(encoding="utf-8").lower()})
        for p in files
    }
    assert not {file: found for file, found in leaks.items() if found}


def test_every_object_the_stacks_write_is_managed_by_the_forks_field_manager(output: Path) -> None:
    for name in ("acme-east", "acme-forge"):
        resources = stack(output, name)["resource"]
        managers = list(field_managers(resources))
        # Node labels, the DeviceClasses and (acme-east) the Karpenter NodePool; node taints under a manager
        # of their own, named after the fork's.
        assert len(managers) >= 3 and set(managers) == {"acme-gpu-stacks", "acme-gpu-stacks-taints"}, name
        classes = resources["kubernetes_manifest"]["device_class"]["for_each"]
        for manifest in classes.values():
            assert manifest["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "acme-gpu-stacks"}
            assert set(manifest["metadata"]["annotations"]) == {"gpu.acme.example/offering"}


def test_the_pool_label_is_the_forks_on_nodes_node_pools_and_kubelet_flags(fleet: Fleet, output: Path) -> None:
    east = stack(output, "acme-east")
    labels = east["resource"]["kubernetes_labels"]["node_labels_a100"]["labels"]
    assert labels["gpu.acme.example/pool"] == "a100"
    node_pool = east["resource"]["kubernetes_manifest"]["karpenter_node_pool_h100-burst"]["manifest"]
    assert node_pool["spec"]["template"]["metadata"]["labels"]["gpu.acme.example/pool"] == "h100-burst"
    provisioned = east["output"]["node_pool_a100_mig"]["value"]
    assert "gpu.acme.example/pool=a100-mig" in provisioned["kubelet_args"][0]
    assert all(pool.pool_label == "gpu.acme.example/pool" for pool in plan_of(fleet, "acme-east").pools)


def test_the_class_the_tool_names_itself_takes_the_forks_suffix(fleet: Fleet) -> None:
    forge = plan_of(fleet, "acme-forge")
    generic = next(c for c in forge.device_classes if c.extended_resource_name == "nvidia.com/gpu")
    assert generic.name == "any-gpu.classes.acme.example"


def test_the_catalog_config_map_lands_where_the_names_put_it(fleet: Fleet, output: Path) -> None:
    east, forge = plan_of(fleet, "acme-east"), plan_of(fleet, "acme-forge")
    assert east.config_map is not None and forge.config_map is not None
    assert (east.config_map.namespace, east.config_map.name) == ("acme-gpu-system", "acme-gpu-catalog")
    # A name the cluster file gives wins over the fleet's default.
    assert (forge.config_map.namespace, forge.config_map.name) == ("acme-gpu-system", "acme-gpu-contracts")
    resources = stack(output, "acme-east")["resource"]
    assert resources["kubernetes_namespace_v1"]["catalog_namespace"]["metadata"]["name"] == "acme-gpu-system"
    metadata = resources["kubernetes_config_map_v1"]["catalog_config_map"]["metadata"]
    assert (metadata["namespace"], metadata["name"]) == ("acme-gpu-system", "acme-gpu-catalog")


def test_quota_files_and_the_kueue_flavor_use_the_forks_names(output: Path) -> None:
    export = output / "export" / "clusters" / "acme-east"
    closed = yaml.safe_load((export / "resource-quota-closed.yaml").read_text(encoding="utf-8"))
    assert closed["metadata"] == {
        "name": "acme-gpu-closed",
        "labels": {"app.kubernetes.io/managed-by": "acme-gpu-stacks"},
    }
    mapping = yaml.safe_load((export / "waldur-quota-mapping.yaml").read_text(encoding="utf-8"))
    assert mapping["zeroInEveryNamespace"]["resourceQuota"] == "acme-gpu-closed"
    flavors = [d for d in yaml.safe_load_all((export / "kueue.yaml").read_text(encoding="utf-8")) if d]
    reserved = next(
        d for d in flavors if d["kind"] == "ResourceFlavor" and d["metadata"]["name"] == "pool-h100-train"
    )
    assert reserved["spec"]["nodeLabels"]["gpu.acme.example/pool"] == "h100-train"


def test_a_namespaces_quota_is_labelled_with_the_forks_field_manager(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--catalog", str(CATALOG), "--stacks-dir", str(STACKS), "--cluster", "acme-east"]
    assert main(["catalog", "quota", *args, "--namespace", "team-a", "nvidia.com/a100=2"]) == 0
    quota = yaml.safe_load(capsys.readouterr().out)
    assert quota["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "acme-gpu-stacks"}


# --- preflight finds a pool's nodes by the fork's label ----------------------------------------------------


def example_east_with(tmp_path: Path, names: dict[str, str]) -> ClusterPlan:
    """The example's gpu-east (the cluster the recorded API server holds) in a catalog with these names."""
    catalog = yaml.safe_load(EXAMPLE_CATALOG.read_text(encoding="utf-8"))
    path = tmp_path / "gpu-catalog.yaml"
    path.write_text(yaml.safe_dump({**catalog, "names": names}), encoding="utf-8")
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    shutil.copy(EXAMPLE_STACKS / "gpu-east.yaml", stacks)
    plan = load_fleet(path, stacks).cluster("gpu-east")
    assert plan is not None
    return plan


def pool_lines(plan: ClusterPlan, scenario: Path | str) -> list[str]:
    with FakeApiServer.for_scenario(scenario) as server, server.api_client() as client:
        out = io.StringIO()
        run_preflight(plan, out, api_client=client)
    return [line for line in out.getvalue().splitlines() if " pool a100-" in line]


def test_preflight_checks_the_nodes_by_the_forks_pool_label(tmp_path: Path) -> None:
    plan = example_east_with(tmp_path, {"labelDomain": "gpu.acme.example"})
    # Nodes still labelled with the old domain (the names changed, the stack not applied yet): each says so.
    before = pool_lines(plan, "healthy")
    assert before and all(line.startswith("FAIL") for line in before), before
    assert "missing labels gpu.acme.example/pool=a100-whole" in before[0]
    # Relabelled as the stack labels them: the same recorded cluster passes.
    scenario = tmp_path / "relabelled"
    (scenario / "api" / "v1").mkdir(parents=True)
    (scenario / "scenario.yaml").write_text(yaml.safe_dump({"base": str(SCENARIOS / "healthy")}), encoding="utf-8")
    nodes = (SCENARIOS / "healthy" / "api" / "v1" / "nodes.json").read_text(encoding="utf-8")
    assert "gpu.themelio.io/pool" in nodes
    (scenario / "api" / "v1" / "nodes.json").write_text(
        nodes.replace("gpu.themelio.io/pool", "gpu.acme.example/pool"), encoding="utf-8"
    )
    after = pool_lines(plan, scenario)
    assert after and all(line.startswith("OK") for line in after), after


# --- Each name checked ---------------------------------------------------------------------------------------


def catalog_with(names: dict[str, Any]) -> dict[str, Any]:
    return {**yaml.safe_load(EXAMPLE_CATALOG.read_text(encoding="utf-8")), "names": names}


def names_problems(tmp_path: Path, names: dict[str, Any]) -> list[str]:
    return [p for p in problems_of(tmp_path, cluster(), catalog=catalog_with(names)) if ": names." in p]


@pytest.mark.parametrize(
    ("names", "key", "message"),
    [
        (
            {"labelDomain": "kubernetes.io"},
            "labelDomain",
            "kubernetes.io: Kubernetes reserves kubernetes.io and its",
        ),
        (
            {"labelDomain": "node.kubernetes.io"},
            "labelDomain",
            "node.kubernetes.io: Kubernetes reserves kubernetes.io",
        ),
        ({"labelDomain": "k8s.io"}, "labelDomain", "k8s.io: Kubernetes reserves k8s.io and its subdomains"),
        ({"labelDomain": "gpu.x-k8s.io"}, None, None),  # x-k8s.io is not k8s.io: allowed
        ({"labelDomain": "gpu.karpenter.sh"}, "labelDomain", "ends in karpenter.sh: Karpenter's NodePool refuses"),
        ({"labelDomain": "Gpu.Acme.Example"}, "labelDomain", "is the prefix of the label Gpu.Acme.Example/pool:"),
        ({"labelDomain": "a" * 60 + "." + "b" * 193}, "labelDomain", "is longer than 253 characters"),
        # The class suffix defaults to the label domain, so a long domain is refused for the class name.
        ({"labelDomain": "a" * 56}, "labelDomain", f"ends the DeviceClass name any-gpu.{'a' * 56}, a DNS"),
        ({"labelDomain": "a" * 56, "deviceClassSuffix": "acme.example"}, None, None),
        (
            {"deviceClassSuffix": "nvidia.com"},
            "deviceClassSuffix",
            "nvidia.com: the NVIDIA DRA driver names its own",
        ),
        ({"deviceClassSuffix": "gpu.nvidia.com"}, "deviceClassSuffix", "could collide with one a chart adds"),
        ({"deviceClassSuffix": "a" * 56}, "deviceClassSuffix", "is longer than 55 characters"),
        ({"deviceClassSuffix": ""}, "deviceClassSuffix", "ends the DeviceClass name any-gpu., a DNS subdomain"),
        ({"fieldManager": ""}, "fieldManager", "must not be empty: server-side apply requires a field manager"),
        (
            {"fieldManager": "acme gpu"},
            "fieldManager",
            "is also the value of the label app.kubernetes.io/managed-by",
        ),
        ({"fieldManager": "a" * 64}, "fieldManager", "is longer than 63 characters"),
        ({"namespace": "Acme"}, "namespace", "a namespace name is a DNS-1123 label: 'Acme' is not a DNS-1123"),
        ({"namespace": "kube-system"}, "namespace", "kube-system exists in every cluster, and the stack creates"),
        ({"namePrefix": "-acme"}, "namePrefix", "makes the object names -acme-catalog and -acme-closed:"),
        ({"labelDomain": 5}, "labelDomain", None),
    ],
)
def test_each_name_is_checked_as_kubernetes_checks_it(
    tmp_path: Path, names: dict[str, Any], key: str | None, message: str | None
) -> None:
    if key is None:
        assert fleet_of(tmp_path, cluster(), catalog=catalog_with(names)).catalog.names == Names.model_validate(
            names
        )
        return
    found = names_problems(tmp_path, names)
    assert len(found) == 1, found
    # file: location: message (line, column), at the key itself, in the project's own words.
    assert re.fullmatch(rf"catalog\.yaml: names\.{key}: .+ \(line \d+, column \d+\)", found[0]), found
    assert not any(word in found[0] for word in PYDANTIC_WORDS), found
    if message is not None:
        assert message in found[0], found


def test_every_bad_name_is_reported_in_one_run(tmp_path: Path) -> None:
    names = {"labelDomain": "k8s.io", "fieldManager": "", "namespace": "default", "namePrefix": "A"}
    found = names_problems(tmp_path, names)
    # In the order of the file's lines: yaml.safe_dump writes the keys sorted.
    assert [p.split(": ")[1] for p in found] == [
        "names.fieldManager",
        "names.labelDomain",
        "names.namePrefix",
        "names.namespace",
    ]


def test_an_offering_cannot_take_the_name_of_the_class_the_tool_names_itself(tmp_path: Path) -> None:
    catalog = catalog_with({"deviceClassSuffix": "acme.example"})
    catalog["offerings"]["nvidia.com/a100"]["deviceClass"] = "any-gpu.acme.example"
    found = problems_of(tmp_path, cluster(), catalog=catalog)
    assert any(
        'offerings["nvidia.com/a100"].deviceClass: any-gpu.acme.example is the class this tool creates' in p
        for p in found
    ), found


def test_a_pool_cannot_set_the_forks_pool_label_but_may_keep_the_old_one(tmp_path: Path) -> None:
    catalog = catalog_with({"labelDomain": "gpu.acme.example"})
    pools = cluster()["nodePools"]
    own = [{**pools[0], "labels": {"gpu.acme.example/pool": "x"}}, pools[1]]
    found = problems_of(tmp_path, cluster(nodePools=own), catalog=catalog)
    assert any(
        "nodePools[0].labels[gpu.acme.example/pool]: gpu.acme.example/pool is part of the label contract" in p
        for p in found
    ), found
    # While a deployed fleet moves to a new domain, the old label can stay as one of the pool's own.
    kept = [{**pools[0], "labels": {"gpu.themelio.io/pool": "whole"}}, pools[1]]
    plan = fleet_of(tmp_path, cluster(nodePools=kept), catalog=catalog).cluster("test")
    assert plan is not None
    assert {k: v for k, v in plan.pools[0].labels.items() if k.endswith("/pool")} == {
        "gpu.acme.example/pool": "whole",
        "gpu.themelio.io/pool": "whole",
    }


def test_the_fleets_namespace_cannot_be_a_release_namespace_of_a_cluster(tmp_path: Path) -> None:
    catalog = catalog_with({"namespace": "gpu-operator"})
    found = problems_of(tmp_path, cluster(catalogConfigMap={}), catalog=catalog)
    assert [p.split(" (line ")[0] for p in found if "catalogConfigMap.namespace" in p] == [
        "stacks/test.yaml: catalogConfigMap.namespace: gpu-operator is also the namespace of the GPU Operator "
        "release, which creates it (create_namespace); two resources creating one namespace race on apply: choose "
        "one of its own, with catalogConfigMap.namespace here or names.namespace in the catalog"
    ], found


# --- The README's example ------------------------------------------------------------------------------------


def first_yaml_example(text: str) -> Any:
    match = re.search(r"```yaml\n(.*?)```", text, re.DOTALL)
    assert match is not None
    return yaml.safe_load(match.group(1))


def test_the_readme_and_docs_example_is_the_fixture_fleets_names() -> None:
    """The README's example (and docs/names.md's) is this fleet's setting, which the real charts and Terraform
    check in CI."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("\n### Use your own names\n")
    section = readme[start : readme.find("\n## ", start + 1)]
    fixture = {"names": yaml.safe_load(CATALOG.read_text(encoding="utf-8"))["names"]}
    assert first_yaml_example(section) == fixture
    assert first_yaml_example((ROOT / "docs" / "names.md").read_text(encoding="utf-8")) == fixture
    assert Names.model_validate(fixture["names"]) == OWN
    assert "docs/names.md" in section
