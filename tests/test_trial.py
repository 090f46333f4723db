"""The platform trial (issue 15, seed 002): training (>= 48 GiB) against evaluation (either generation) on
ResourceSlices of mixed generations; the independent check of each selected device; exit codes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURES, SNAPSHOTS
from tests.snapshot import assert_matches_snapshot
from themelio_gpu.cli import main
from themelio_gpu.dryrun.match import DeviceRef
from themelio_gpu.dryrun.resourceslices import Device, load_resourceslices
from themelio_gpu.dryrun.trial import TrialReport, render_trial, run_trial
from themelio_gpu.inputs.catalog.catalog import Catalog
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.problems import Problems

CATALOG = Path("tests", "fixtures", "fleets", "capability", "catalog", "gpu-catalog.yaml")
SLICES = Path("tests/fixtures/resourceslices/mixed/mixed-generations.yaml")
TRAINING, EVALUATION = "nvidia.com/gpu-48gb", "nvidia.com/gpu-eval"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    problems = Problems()
    loaded = load_catalog(FIXTURES / "fleets" / "capability" / "catalog" / "gpu-catalog.yaml", problems)
    assert loaded is not None, list(problems)
    return loaded


@pytest.fixture(scope="module")
def devices() -> list[Device]:
    return load_resourceslices(FIXTURES / "resourceslices" / "mixed" / "mixed-generations.yaml")


def trial(catalog: Catalog, devices: list[Device], *names: str) -> TrialReport:
    return run_trial(catalog, [catalog.offerings[n] for n in names], devices, "slices.yaml")


def labels(devices: tuple[DeviceRef, ...]) -> set[str]:
    return {d.label for d in devices}


def test_training_excludes_unsuitable_devices_and_evaluation_keeps_its_choices(
    catalog: Catalog, devices: list[Device]
) -> None:
    report = trial(catalog, devices, TRAINING, EVALUATION)
    assert report.ok, report.problems
    # Training: whole GPUs publishing >= 48 GiB, any generation; the 24 GiB A10G and the 45 GiB L40S are out.
    assert labels(report.offerings[0].devices) == {
        "gpu-a100-80/gpu-0",
        "gpu-a100-80/gpu-1",
        "gpu-b200/gpu-0",
        "gpu-h100-a/gpu-0",
        "gpu-h100-a/gpu-1",
        "gpu-rtxpro/gpu-0",
    }
    # Evaluation keeps both generations it is meant for: Ampere (A10G, A100) and Hopper (H100).
    assert labels(report.excluded_by(EVALUATION, TRAINING)) == {
        "gpu-a10g/gpu-0",
        "gpu-a10g/gpu-1",
        "gpu-a100-40-old/gpu-0",
        "gpu-a100-40-old/gpu-1",
    }
    assert labels(report.excluded_by(TRAINING, EVALUATION)) == {"gpu-b200/gpu-0", "gpu-rtxpro/gpu-0"}
    unreached = labels(report.unreached)
    assert {"gpu-l40s/gpu-0", "gpu-vfio/gpu-vfio-0", "gpu-h100-mig/gpu-0-mig-3g40gb-9-4"} <= unreached
    assert not any(label.startswith("gpu-b200/channel") for label in unreached)  # not GPUs: counted apart
    assert dict(report.other_drivers) == {"compute-domain.nvidia.com": 2}


def test_seed_trial_output_matches_reviewed_snapshot(
    capsys: pytest.CaptureFixture[str], update_snapshots: bool
) -> None:
    code = main(["trial", "--catalog", str(CATALOG), "--slices", str(SLICES), TRAINING, EVALUATION])
    assert code == 0
    assert_matches_snapshot(
        SNAPSHOTS / "trial" / "seed-training-vs-evaluation.txt", capsys.readouterr().out, update_snapshots
    )


def test_trial_json_has_the_same_findings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trial", "--json", "--catalog", str(CATALOG), "--slices", str(SLICES), TRAINING, EVALUATION]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True
    (training, evaluation) = data["offerings"]
    assert len(training["devices"]) == 6 and len(evaluation["devices"]) == 8
    assert {d["productName"] for d in evaluation["notSelectedBy"][TRAINING]} == {
        "NVIDIA A10G",
        "NVIDIA A100-SXM4-40GB",
    }


def test_a_product_offering_and_a_capability_offering_side_by_side(
    catalog: Catalog, devices: list[Device]
) -> None:
    report = trial(catalog, devices, "nvidia.com/rtx-pro-6000-mig-2g.48gb", "nvidia.com/rtx-pro-6000", TRAINING)
    assert report.ok, report.problems
    assert labels(report.offerings[0].devices) == {"gpu-rtxpro/gpu-1-mig-2g48gb-14-0"}
    assert labels(report.excluded_by("nvidia.com/rtx-pro-6000", TRAINING)) == set()
    text = render_trial(report)
    assert "[1] nvidia.com/rtx-pro-6000-mig-2g.48gb (product rtx-pro-6000, MIG 2g.48gb): 1 device" in text


def test_a_selector_that_does_not_say_what_the_capability_means_fails_the_trial(
    catalog: Catalog, devices: list[Device]
) -> None:
    training = catalog.offerings[TRAINING]
    # A hand-edited class that forgot its memory term: the independent check reads each device's capacity.
    broken = dataclasses.replace(
        training, selector="device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    )
    report = run_trial(catalog, [broken, catalog.offerings[EVALUATION]], devices, "slices.yaml")
    assert not report.ok
    bad = {ref.label: reasons for ref, reasons in report.offerings[0].violations}
    assert bad["gpu-a10g/gpu-0"] == ("memory 22.49Gi < 48Gi",)
    assert bad["gpu-l40s/gpu-1"] == ("memory 44.99Gi < 48Gi",)
    assert "gpu-h100-a/gpu-0" not in bad
    assert (
        "nvidia.com/gpu-48gb selects gpu-a10g/gpu-0 (NVIDIA A10G, gpu), which violates its definition: "
        "memory 22.49Gi < 48Gi"
    ) in report.problems


def test_the_check_reads_every_capability_fact(catalog: Catalog, devices: list[Device], tmp_path: Path) -> None:
    data = yaml.safe_load(CATALOG.read_text(encoding="utf-8"))
    data["offerings"]["nvidia.com/strict"] = {
        "deviceClass": "strict.gpu.themelio.io",
        "capability": {
            "products": ["h100-80gb"],
            "architectures": ["Hopper"],
            "minComputeCapability": "9.0",
            "minDriverVersion": "580.100.0",
            "type": "mig",
        },
        "overlaps": "allowed",
        "displayName": "Strict",
        "quota": {"waldurComponent": "strict"},
    }
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    problems = Problems()
    loaded = load_catalog(path, problems)
    assert loaded is not None, list(problems)
    everything = dataclasses.replace(
        loaded.offerings["nvidia.com/strict"], selector="device.driver == 'gpu.nvidia.com'"
    )
    report = run_trial(loaded, [everything, loaded.offerings[TRAINING]], devices, "slices.yaml")
    bad = {ref.label: reasons for ref, reasons in report.offerings[0].violations}
    assert "gpu-h100-mig/gpu-0-mig-1g10gb-19-0" not in bad  # H100, Hopper, 9.0, driver 580.105.8, MIG: meets it
    assert bad["gpu-b200/gpu-1-mig-1g23gb-19-0"] == (
        "productName 'NVIDIA B200' is not one of NVIDIA H100 80GB HBM3",
        "architecture 'Blackwell' is not Hopper",
        "driverVersion 580.95.5 < 580.100.0",
    )
    assert bad["gpu-a10g/gpu-0"][0] == "type gpu, not mig"
    assert "cudaComputeCapability 8.6.0 < 9.0" in bad["gpu-a10g/gpu-0"]


def test_an_offering_that_selects_nothing_fails_the_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only_a10g = tmp_path / "slices.yaml"
    data = yaml.safe_load(SLICES.read_text(encoding="utf-8"))
    data["items"] = [i for i in data["items"] if i["spec"]["nodeName"] == "gpu-a10g"]
    only_a10g.write_text(yaml.safe_dump(data), encoding="utf-8")
    code = main(["trial", "--catalog", str(CATALOG), "--slices", str(only_a10g), TRAINING, EVALUATION])
    out = capsys.readouterr().out
    assert code == 1
    assert "nvidia.com/gpu-48gb selects no device: requests for it would never be satisfied here" in out
    assert out.rstrip().endswith("RESULT: NOT OK")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ([TRAINING], "command line: nvidia.com/gpu-48gb: a trial compares two or more offerings"),
        ([TRAINING, "nvidia.com/nope"], "command line: nvidia.com/nope: not in the catalog"),
        ([TRAINING, TRAINING], "command line: nvidia.com/gpu-48gb: nvidia.com/gpu-48gb is already on trial"),
    ],
)
def test_bad_trial_input_is_a_message(names: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trial", "--catalog", str(CATALOG), "--slices", str(SLICES), *names]) == 2
    assert capsys.readouterr().err.startswith(message)


def test_unreadable_slices_are_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["trial", "--catalog", str(CATALOG), "--slices", str(tmp_path / "none.yaml"), TRAINING, EVALUATION])
        == 2
    )
    assert "cannot read" in capsys.readouterr().err
