"""The DeviceClass dry run against ResourceSlice fixtures shaped like the NVIDIA driver's output."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from themelio_gpu.dryrun.match import ClassUnderTest, MatchReport, match_classes, render_report, report_as_dict
from themelio_gpu.dryrun.resourceslices import Device, load_resourceslices
from themelio_gpu.k8s.semver import parse_semver

FIXTURES = Path(__file__).parent / "fixtures" / "resourceslices"

# The chart's own DeviceClass selectors, verbatim from nvidia-facts.md section 1
# (dra-driver-nvidia-gpu templates/deviceclass-*.yaml).
CHART_GPU = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
CHART_MIG = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
CHART_VFIO = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"
CHART_CLASSES = [
    ClassUnderTest("gpu.nvidia.com", "nvidia.com/gpu", [CHART_GPU], None),
    ClassUnderTest("mig.nvidia.com", None, [CHART_MIG], None),
    ClassUnderTest("vfio.gpu.nvidia.com", None, [CHART_VFIO], None),
]

NV = "device.attributes['gpu.nvidia.com']"
GUARD = "device.driver == 'gpu.nvidia.com'"


def whole_gpu(product: str) -> str:
    return f"{GUARD} && {NV}.type == 'gpu' && {NV}.productName == '{product}'"


def mig(product: str | None, profile: str) -> str:
    product_term = f" && {NV}.productName == '{product}'" if product else ""
    return f"{GUARD} && {NV}.type == 'mig'{product_term} && {NV}.profile == '{profile}'"


def offering(key: str, selector: str) -> ClassUnderTest:
    return ClassUnderTest(f"{key}.themelio.io", f"themelio.io/{key}", [selector], key)


# A catalog covering every fixture device exactly once.
CATALOG = [
    offering("a10g", whole_gpu("NVIDIA A10G")),
    offering("a100-40gb", whole_gpu("NVIDIA A100-SXM4-40GB")),
    offering("a100-80gb", whole_gpu("NVIDIA A100-SXM4-80GB")),
    offering("h100", whole_gpu("NVIDIA H100 80GB HBM3")),
    offering("a100-40gb-1g.5gb", mig("NVIDIA A100-SXM4-40GB", "1g.5gb")),
    offering("a100-40gb-1g.10gb", mig("NVIDIA A100-SXM4-40GB", "1g.10gb")),
    offering("a100-40gb-2g.10gb", mig("NVIDIA A100-SXM4-40GB", "2g.10gb")),
    offering("a100-40gb-3g.20gb", mig("NVIDIA A100-SXM4-40GB", "3g.20gb")),
    offering("a100-80gb-1g.10gb", mig("NVIDIA A100-SXM4-80GB", "1g.10gb")),
]


@pytest.fixture(scope="module")
def devices() -> list[Device]:
    return [device for path in sorted(FIXTURES.glob("*.yaml")) for device in load_resourceslices(path)]


def selected(report: MatchReport, class_name: str) -> set[str]:
    (item,) = [c for c in report.classes if c.name == class_name]
    return {device.label for device in item.devices}


def labels(devices: list[Device], predicate: Callable[[Device], bool] | None = None) -> set[str]:
    return {f"{d.node}/{d.name}" for d in devices if predicate is None or predicate(d)}


def test_chart_classes_select_whole_gpus_and_mig_devices(devices: list[Device]) -> None:
    report = match_classes(CHART_CLASSES, devices)
    whole = selected(report, "gpu.nvidia.com")
    migs = selected(report, "mig.nvidia.com")
    assert whole == labels(devices, lambda d: d.device_type == "gpu")
    assert migs == labels(devices, lambda d: d.device_type == "mig")
    assert len(whole) == 28 and len(migs) == 14
    # No whole GPU is published by a MIG-mode node.
    assert not {label for label in whole if "-mig-1/" in label}
    assert report.errors == ()
    # Driver classes serve no offering: every device still counts as unselected by an offering.
    assert len(report.unselected_devices) == len(devices)
    # The empty vfio class is a warning, not a problem.
    assert report.empty_driver_classes == ("vfio.gpu.nvidia.com",)
    assert report.ok


def test_product_and_profile_selector_picks_exactly_the_intended_devices(devices: list[Device]) -> None:
    expression = (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
        " && device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-40GB'"
        " && device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"
    )
    report = match_classes([offering("a100-40gb-1g.5gb", expression)], devices)
    assert selected(report, "a100-40gb-1g.5gb.themelio.io") == {
        "gpu-a100-40-mig-1/gpu-0-mig-1g5gb-19-0",
        "gpu-a100-40-mig-1/gpu-0-mig-1g5gb-19-1",
    }


def test_memory_selector(devices: list[Device]) -> None:
    memory = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
    report = match_classes([offering("big", f"{GUARD} && {NV}.type == 'gpu' && {memory}")], devices)
    chosen = selected(report, "big.themelio.io")
    # 40960Mi == 40Gi counts; the A10G (23028Mi) does not.
    assert chosen == labels(devices, lambda d: d.device_type == "gpu" and d.product_name != "NVIDIA A10G")
    assert len(chosen) == 24


def test_mig_size_selector(devices: list[Device]) -> None:
    small = "device.capacity['gpu.nvidia.com'].multiprocessors.isLessThan(quantity('30'))"
    report = match_classes([offering("small-mig", f"{GUARD} && {NV}.type == 'mig' && {small}")], devices)
    assert selected(report, "small-mig.themelio.io") == labels(
        devices, lambda d: d.profile in ("1g.5gb", "1g.10gb", "2g.10gb")
    )


@pytest.mark.parametrize(("minimum", "count"), [("570.0.0", 42), ("580.105.8", 42), ("580.105.9", 0)])
def test_driver_version_selector(devices: list[Device], minimum: str, count: int) -> None:
    expression = f"{NV}.driverVersion.compareTo(semver('{minimum}')) >= 0"
    report = match_classes([ClassUnderTest("by-driver", None, [expression], None)], devices)
    assert len(selected(report, "by-driver")) == count
    assert report.errors == ()


def test_clean_catalog_is_ok(devices: list[Device]) -> None:
    report = match_classes(CHART_CLASSES + CATALOG, devices)
    assert report.ok
    assert report.empty_classes == () and report.overlaps == () and report.errors == ()
    for item in CATALOG:
        assert selected(report, item.name), item.name


def test_empty_class_is_a_problem(devices: list[Device]) -> None:
    report = match_classes([*CATALOG, offering("l4", whole_gpu("NVIDIA L4"))], devices)
    assert report.empty_classes == ("l4.themelio.io",)
    assert not report.ok
    assert "empty class: l4.themelio.io (offering l4) selects no device" in render_report(report)


def test_an_offering_whose_devices_are_not_there_is_not_a_problem(devices: list[Device]) -> None:
    report = match_classes([*CATALOG, offering("l4", whole_gpu("NVIDIA L4"))], devices, absent={"l4"})
    assert report.ok and report.empty_classes == ()
    assert report.absent_classes == ("l4.themelio.io",)
    text = render_report(report)
    assert (
        "offering l4: class l4.themelio.io -> themelio.io/l4 (0 devices)\n  (none on these nodes: they have no device of this offering)"
        in text
    )
    assert (
        "NOT ON THESE NODES (1): no problem for slices of some nodes\n  l4: class l4.themelio.io\nPROBLEMS (0)"
        in text
    )


def test_overlap_between_catalog_classes_is_a_problem(devices: list[Device]) -> None:
    # 1g.10gb without a productName term also matches the A100-40GB's (different) 1g.10gb slices.
    generic = offering("any-1g.10gb", mig(None, "1g.10gb"))
    report = match_classes([*CHART_CLASSES, *CATALOG, generic], devices)
    overlapping = {overlap.device.label: overlap.classes for overlap in report.overlaps}
    assert set(overlapping) == labels(devices, lambda d: d.profile == "1g.10gb")
    assert len(overlapping) == 9
    assert overlapping["gpu-a100-40-mig-1/gpu-1-mig-1g10gb-15-0"] == (
        "a100-40gb-1g.10gb.themelio.io",
        "any-1g.10gb.themelio.io",
    )
    # The chart's generic classes also select these devices; that is expected and not counted.
    assert all("nvidia.com" not in name for names in overlapping.values() for name in names)
    assert not report.ok


def test_unselected_devices_are_only_a_warning(devices: list[Device]) -> None:
    report = match_classes([offering("h100", whole_gpu("NVIDIA H100 80GB HBM3"))], devices)
    assert report.ok
    assert {d.label for d in report.unselected_devices} == labels(devices) - labels(
        devices, lambda d: d.product_name == "NVIDIA H100 80GB HBM3"
    )
    text = render_report(report)
    assert "WARNINGS (34)" in text
    assert "unselected device: gpu-a10g-1/gpu-0 (NVIDIA A10G, gpu)" in text
    assert text.rstrip().endswith("RESULT: OK (0 problems, 34 warnings)")


def compute_domain_device() -> Device:
    """A device of the other NVIDIA driver: its attributes live in another domain."""
    return Device(
        node="gpu-h100-1",
        driver="compute-domain.nvidia.com",
        pool="gpu-h100-1",
        name="channel-0",
        attributes={"compute-domain.nvidia.com": {"type": "channel", "id": 0}},
        capacity={},
    )


def test_unguarded_selector_errors_on_another_drivers_device(devices: list[Device]) -> None:
    unguarded = offering("h100-unguarded", f"{NV}.type == 'gpu' && {NV}.productName == 'NVIDIA H100 80GB HBM3'")
    channel = ClassUnderTest(
        "compute-domain-default-channel.nvidia.com",
        None,
        [
            "device.driver == 'compute-domain.nvidia.com' && "
            "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
            "device.attributes['compute-domain.nvidia.com'].id == 0"
        ],
        None,
    )
    report = match_classes([*CHART_CLASSES, channel, unguarded], [*devices, compute_domain_device()])
    (error,) = report.errors
    assert (error.class_name, error.selector_index, error.kind) == ("h100-unguarded.themelio.io", 0, "evaluation")
    assert error.device is not None and error.device.label == "gpu-h100-1/channel-0"
    assert error.message == "no such key: type"
    # The guarded chart classes evaluate cleanly on the same device.
    assert selected(report, "compute-domain-default-channel.nvidia.com") == {"gpu-h100-1/channel-0"}
    assert len(selected(report, "h100-unguarded.themelio.io")) == 8
    assert not report.ok
    assert (
        "selector error: class h100-unguarded.themelio.io selectors[0] on gpu-h100-1/channel-0: "
        "no such key: type (allocation would abort)"
    ) in render_report(report)


def test_selectors_are_anded_and_stop_at_the_first_false(devices: list[Device]) -> None:
    # The second selector would fail on the compute-domain device; the first one is false there.
    two = ClassUnderTest("a10g-two", "themelio.io/a10g", [GUARD, f"{NV}.productName == 'NVIDIA A10G'"], "a10g")
    report = match_classes([two], [*devices, compute_domain_device()])
    assert report.errors == ()
    assert selected(report, "a10g-two") == labels(devices, lambda d: d.product_name == "NVIDIA A10G")


def test_compile_errors_are_reported_once_per_selector(devices: list[Device]) -> None:
    broken = ClassUnderTest(
        "broken.themelio.io",
        "themelio.io/broken",
        [GUARD, "device.capacity['gpu.nvidia.com'].memory >= 1"],
        "broken",
    )
    report = match_classes([broken], devices)
    (error,) = report.errors
    assert (error.device, error.selector_index, error.kind) == (None, 1, "compile")
    assert "_>=_" in error.message
    assert report.empty_classes == ()  # not evaluated, so not reported as empty as well
    assert report.classes[0].evaluable is False
    assert "invalid selector: class broken.themelio.io selectors[1]" in render_report(report)


def test_unsupported_feature_is_reported_as_unverifiable(devices: list[Device]) -> None:
    optional = ClassUnderTest("opt", "themelio.io/opt", [f"{NV}.?profile.orValue('') == '1g.5gb'"], "opt")
    report = match_classes([optional], devices)
    assert [e.kind for e in report.errors] == ["unsupported"]
    assert "unverifiable: class opt selectors[0]" in render_report(report)


def test_rendering_is_deterministic_and_sorted(devices: list[Device]) -> None:
    classes = [*CHART_CLASSES, *CATALOG, offering("l4", whole_gpu("NVIDIA L4"))]
    expected = render_report(match_classes(classes, devices))
    rng = random.Random(7)
    for _ in range(3):
        shuffled_classes, shuffled_devices = classes[:], devices[:]
        rng.shuffle(shuffled_classes)
        rng.shuffle(shuffled_devices)
        assert render_report(match_classes(shuffled_classes, shuffled_devices)) == expected
    lines = expected.splitlines()
    assert lines[0] == "DeviceClass dry run: 13 classes against 42 devices on 6 nodes"
    headings = [line for line in lines if line.startswith(("offering ", "class "))]
    assert headings[0] == "offering a10g: class a10g.themelio.io -> themelio.io/a10g (4 devices)"
    assert headings[-1] == "class vfio.gpu.nvidia.com (driver class, 0 devices)"
    assert "class gpu.nvidia.com -> nvidia.com/gpu (driver class, 28 devices)" in headings
    # Natural device order: gpu-2 before gpu-10 style, node by node.
    block = lines[lines.index(headings[0]) + 1 : lines.index(headings[0]) + 5]
    assert block == [f"  gpu-a10g-1/gpu-{i} (NVIDIA A10G, gpu)" for i in range(4)]
    assert "  gpu-a100-40-mig-1/gpu-0-mig-1g5gb-19-0 (NVIDIA A100-SXM4-40GB, 1g.5gb)" in lines
    assert lines.index("PROBLEMS (1)") < lines.index("WARNINGS (1)")


def test_report_as_dict_is_json(devices: list[Device]) -> None:
    generic = offering("any-1g.10gb", mig(None, "1g.10gb"))
    report = match_classes([*CHART_CLASSES, *CATALOG, generic], devices)
    data = json.loads(json.dumps(report_as_dict(report)))
    assert data["ok"] is False
    assert len(data["overlaps"]) == 9
    first = data["classes"][0]
    assert first["name"] == "a10g.themelio.io" and first["offering"] == "a10g"
    assert first["devices"][0] == {
        "node": "gpu-a10g-1",
        "name": "gpu-0",
        "driver": "gpu.nvidia.com",
        "pool": "gpu-a10g-1",
        "productName": "NVIDIA A10G",
        "type": "gpu",
        "profile": None,
    }
    assert data["emptyDriverClasses"] == ["vfio.gpu.nvidia.com"]


def test_version_attribute_types_survive_loading(devices: list[Device]) -> None:
    assert {d.attribute("driverVersion") for d in devices} == {parse_semver("580.105.8")}
