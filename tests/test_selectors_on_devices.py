"""The catalog's generated CEL selectors, evaluated by a real CEL implementation against ResourceSlices
shaped like the NVIDIA DRA driver's output: each class selects exactly the devices meant for it."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLE_CATALOG, FIXTURES, ROOT
from themelio_gpu.dryrun.cluster_match import classes_for_catalog, classes_for_cluster, match_cluster
from themelio_gpu.dryrun.match import MatchReport, match_classes
from themelio_gpu.dryrun.resourceslices import Device, load_resourceslices
from themelio_gpu.inputs.catalog.catalog import Catalog
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.plan.model import Fleet

SLICES = FIXTURES / "resourceslices"


@pytest.fixture(scope="module")
def devices() -> list[Device]:
    return [d for path in sorted(SLICES.glob("*.yaml")) for d in load_resourceslices(path)]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The example catalog plus an A100-80GB 1g.10gb offering, the profile name A100-40GB also has."""
    data = yaml.safe_load(EXAMPLE_CATALOG.read_text())
    data["offerings"]["nvidia.com/a100-80gb-mig-1g.10gb"] = {
        "deviceClass": "a100-80gb-mig-1g.10gb.gpu.themelio.io",
        "product": "a100-80gb",
        "migProfile": "1g.10gb",
        "displayName": "A100 80GB MIG 1g.10gb",
        "quota": {"waldurComponent": "gpu_a100_80gb_mig_1g_10gb"},
    }
    path = tmp_path_factory.mktemp("catalog") / "catalog.yaml"
    path.write_text(yaml.safe_dump(data))
    problems = Problems()
    loaded = load_catalog(path, problems)
    assert loaded is not None, list(problems)
    return loaded


@pytest.fixture(scope="module")
def report(catalog: Catalog, devices: list[Device]) -> MatchReport:
    return match_classes(classes_for_catalog(catalog), devices)


def selected(report: MatchReport, class_name: str) -> set[str]:
    (item,) = [c for c in report.classes if c.name == class_name]
    return {d.label for d in item.devices}


def names(node: str, *devices: str) -> set[str]:
    return {f"{node}/{d}" for d in devices}


def test_whole_gpu_classes_select_their_product_only(report: MatchReport) -> None:
    assert selected(report, "a10g.gpu.themelio.io") == names("gpu-a10g-1", "gpu-0", "gpu-1", "gpu-2", "gpu-3")
    assert selected(report, "a100-40gb.gpu.themelio.io") == names("gpu-a100-40-1", *(f"gpu-{i}" for i in range(8)))
    assert selected(report, "h100-80gb.gpu.themelio.io") == names("gpu-h100-1", *(f"gpu-{i}" for i in range(8)))


def test_mig_classes_select_their_profile_on_their_product(report: MatchReport) -> None:
    assert selected(report, "a100-40gb-mig-1g.5gb.gpu.themelio.io") == names(
        "gpu-a100-40-mig-1", "gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1"
    )
    assert selected(report, "a100-40gb-mig-3g.20gb.gpu.themelio.io") == names(
        "gpu-a100-40-mig-1", "gpu-0-mig-3g20gb-9-4", "gpu-1-mig-3g20gb-9-4"
    )
    # 1g.10gb exists on the A100-40GB node too, as a different slice: the product term keeps it out.
    eighty = selected(report, "a100-80gb-mig-1g.10gb.gpu.themelio.io")
    assert eighty == names("gpu-a100-80-mig-1", *(f"gpu-0-mig-1g10gb-19-{i}" for i in range(7)))
    assert not any(label.startswith("gpu-a100-40-mig-1/") for label in eighty)


def test_alias_classes_select_what_their_offering_selects(report: MatchReport) -> None:
    assert selected(report, "legacy-mig-1g.5gb.gpu.themelio.io") == selected(
        report, "a100-40gb-mig-1g.5gb.gpu.themelio.io"
    )


def test_a_mig_mode_gpu_publishes_no_whole_device(report: MatchReport) -> None:
    whole = selected(report, "gpu.nvidia.com")
    assert not any("-mig-" in label for label in whole)
    assert selected(report, "a100-40gb.gpu.themelio.io") <= whole


def test_no_device_is_claimed_by_two_specific_offerings(report: MatchReport) -> None:
    assert report.overlaps == ()
    assert report.errors == ()
    # nvidia.com/gpu (the chart's generic class) shares whole GPUs with product offerings: a warning.
    assert report.shared_devices
    assert all("gpu.nvidia.com" in s.classes for s in report.shared_devices)


def test_memory_and_driver_constraints_are_evaluated(catalog: Catalog, devices: list[Device]) -> None:
    h100 = catalog.offerings["nvidia.com/h100"]
    assert "compareTo(quantity('79Gi')) >= 0" in h100.selector
    assert "driverVersion.compareTo(semver('570.0.0', true)) >= 0" in h100.selector
    from themelio_gpu.dryrun.match import ClassUnderTest

    strict = h100.selector.replace("semver('570.0.0', true)", "semver('600.0.0', true)")
    big = h100.selector.replace("quantity('79Gi')", "quantity('81Gi')")
    result = match_classes(
        [ClassUnderTest("driver", None, [strict], "x"), ClassUnderTest("memory", None, [big], "y")], devices
    )
    # The fixture's driver is 580.105.8 and the H100 publishes 81559Mi (79.6Gi): both select nothing.
    assert set(result.empty_classes) == {"driver", "memory"}


def test_an_offering_selecting_nothing_is_a_problem(example_fleet: Fleet, devices: list[Device]) -> None:
    east = example_fleet.cluster("gpu-east")
    assert east is not None
    only_a10g = [d for d in devices if d.node == "gpu-a10g-1"]
    result = match_cluster(east, only_a10g)
    assert not result.ok
    assert "a100-40gb.gpu.themelio.io" in result.empty_classes
    assert {c.name for c in classes_for_cluster(east)} >= {"gpu.nvidia.com", "mig.nvidia.com"}


def test_two_offerings_claiming_one_device_is_a_problem(catalog: Catalog, devices: list[Device]) -> None:
    from themelio_gpu.dryrun.match import ClassUnderTest

    broad = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    classes = [
        *classes_for_catalog(catalog),
        ClassUnderTest("any.themelio.io", "example.com/any", [broad], "example.com/any"),
    ]
    result = match_classes(classes, devices)
    assert not result.ok
    assert any("any.themelio.io" in o.classes and "a10g.gpu.themelio.io" in o.classes for o in result.overlaps)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "themelio_gpu", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def _kubectl_list(tmp_path: Path, *files: str) -> Path:
    items: list[Any] = []
    for name in files:
        for document in yaml.safe_load_all((SLICES / name).read_text()):
            items.extend(document["items"] if document.get("kind") == "List" else [document])
    path = tmp_path / "slices.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": copy.deepcopy(items)}))
    return path


def test_match_command_on_a_healthy_cluster(tmp_path: Path) -> None:
    slices = _kubectl_list(tmp_path, "a10g-node.yaml", "h100-node.yaml")
    result = _run("match", "--slices", str(slices), "--cluster", "gpu-west")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "offering nvidia.com/h100: class h100-80gb.gpu.themelio.io -> nvidia.com/h100 (8 devices)" in result.stdout
    )
    assert "gpu-h100-1/gpu-0 (NVIDIA H100 80GB HBM3, gpu)" in result.stdout
    assert "RESULT: OK" in result.stdout


def test_match_command_on_some_nodes_calls_an_offering_not_there_absent_not_a_problem(tmp_path: Path) -> None:
    # gpu-west serves nvidia.com/h100 and nvidia.com/a10g; these slices have an A10G and an A100 80GB node.
    slices = _kubectl_list(tmp_path, "a10g-node.yaml", "a100-80gb-node.yaml")
    result = _run("match", "--slices", str(slices), "--cluster", "gpu-west", "--json")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["emptyClasses"] == []
    assert report["absentClasses"] == ["h100-80gb.gpu.themelio.io"]
    assert {d["node"] for d in report["unselectedDevices"]} == {"gpu-a100-80-1"}


def test_match_command_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "List", "items": [{"kind": "Pod"}]}')
    result = _run("match", "--slices", str(bad))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert str(bad) in result.stderr
