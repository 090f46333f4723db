"""A chart from a local chart folder (inputs/chart_sources.py, docs/charts.md "Air-gapped clusters").

- the fixture fleet local-charts: its stack ships the archive as a cdktf asset and installs it by its path in
  the stack's folder (reviewed snapshot), byte-identical wherever it is written, with no machine path;
- every way a folder can be wrong is one problem at its key, with its line;
- the catalog's mirror and $THEMELIO_CHART_MIRROR take a folder too;
- an archive edited behind an unchanged cluster file reaches the stack: incremental synthesis, `check`, the
  output folder's assets, `changed`;
- `charts fetch` unpacks a local chart into the cache; the sandbox deploys through the same setting.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster, write_fleet
from tests.chart_archives import STAND_IN_ARCHIVE, STAND_IN_SOURCE, chart, pack, pack_folder
from tests.conftest import EXAMPLE_CATALOG, FIXTURE_SNAPSHOTS, FIXTURES, ROOT
from tests.snapshot import assert_matches_snapshot
from themelio_gpu.cli import main
from themelio_gpu.inputs.problems import InputError
from themelio_gpu.outputs.synth import synthesize, synthesize_files
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.settings import CHART_MIRROR_ENV, DEFAULT_CATALOG, DEFAULT_STACKS_DIR, InputPaths

FLEET = FIXTURES / "fleets" / "local-charts"
OPERATOR = "gpu-operator-v26.3.3.tgz"


def _project(tmp_path: Path, *clusters: dict[str, Any], **catalog: Any) -> InputPaths:
    """A project in tmp_path/proj laid out as a fork is (the example's catalog, keys replaced; cluster files),
    and an empty charts/."""
    root = tmp_path / "proj"
    path = root / DEFAULT_CATALOG
    path.parent.mkdir(parents=True, exist_ok=True)
    (root / "charts").mkdir(exist_ok=True)
    data = {**yaml.safe_load(EXAMPLE_CATALOG.read_text(encoding="utf-8")), **catalog}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return InputPaths(*write_fleet(root, list(clusters), path))


def _archive(tmp_path: Path, name: str = OPERATOR, data: bytes | None = None) -> Path:
    path = tmp_path / "proj" / "charts" / name
    chart_name, _, version = name.removesuffix(".tgz").rpartition("-")
    path.write_bytes(data if data is not None else chart(chart_name, version))
    return path


def _problems(paths: InputPaths, tmp_path: Path) -> list[str]:
    with pytest.raises(InputError) as raised:
        load_fleet(paths.catalog, paths.stacks_dir)
    return [str(p).replace(f"{tmp_path}/", "") for p in raised.value.problems]


def _fleet(paths: InputPaths) -> list[str]:
    return ["--catalog", str(paths.catalog), "--stacks-dir", str(paths.stacks_dir)]


def _synthesized_with_local_chart(tmp_path: Path, folder: str) -> tuple[InputPaths, Path]:
    """A one-cluster project whose GPU Operator chart comes from charts/, synthesized into `folder`."""
    paths = _project(tmp_path, cluster(gpuOperator={"repository": "charts"}))
    _archive(tmp_path)
    synthesize_files(paths, tmp_path / folder, progress=None)
    return paths, tmp_path / folder


def _plan(paths: InputPaths) -> ClusterPlan:
    return load_fleet(paths.catalog, paths.stacks_dir).clusters[0]


def _stack(out: Path, name: str = "test") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "stacks" / name / "cdk.tf.json").read_text(encoding="utf-8"))
    return data


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- the fixture fleet --------------------------------------------------------------------------------------


def test_the_fixture_archive_is_its_chart_source_packaged() -> None:
    # Compared unzipped: the tar is byte for byte reproducible, a zlib of another version may compress otherwise.
    assert gzip.decompress(STAND_IN_ARCHIVE.read_bytes()) == gzip.decompress(pack_folder(STAND_IN_SOURCE))


@pytest.fixture(scope="module")
def local_fleet() -> Fleet:
    return load_fleet(FLEET / DEFAULT_CATALOG, FLEET / DEFAULT_STACKS_DIR)


def test_the_stack_ships_the_archive_and_installs_it_by_its_path(
    local_fleet: Fleet, tmp_path: Path, update_snapshots: bool
) -> None:
    synthesize(local_fleet, tmp_path / "out", progress=None)
    text = (tmp_path / "out" / "stacks" / "gpu-airgap" / "cdk.tf.json").read_text(encoding="utf-8")
    assert_matches_snapshot(FIXTURE_SNAPSHOTS / "local-charts" / "gpu-airgap.cdk.tf.json", text, update_snapshots)
    releases = json.loads(text)["resource"]["helm_release"]
    sha = hashlib.sha256(STAND_IN_ARCHIVE.read_bytes()).hexdigest()
    path = f"assets/gpu_operator_chart/{sha}/{OPERATOR}"
    assert releases["gpu_operator"]["chart"] == path
    assert "repository" not in releases["gpu_operator"]
    assert releases["gpu_operator"]["version"] == "v26.3.3"  # the configured version the provider checks
    # The DRA driver chart still comes from a repository (no mirror in this catalog: where it is published).
    assert releases["dra_driver_nvidia_gpu"]["repository"] == "oci://registry.k8s.io/dra-driver-nvidia/charts"
    stack = tmp_path / "out" / "stacks" / "gpu-airgap"
    assert sorted(_files(stack)) == [path, "cdk.tf.json"]
    assert (stack / path).read_bytes() == STAND_IN_ARCHIVE.read_bytes()
    assert [a.archive for a in local_fleet.clusters[0].chart_archives] == [f"charts/{OPERATOR}"]


def test_the_output_is_the_same_bytes_wherever_it_is_written_and_names_no_machine_path(
    local_fleet: Fleet, tmp_path: Path
) -> None:
    for out in ("one", "deeper/two"):
        synthesize(local_fleet, tmp_path / out, progress=None)
    first, second = _files(tmp_path / "one"), _files(tmp_path / "deeper" / "two")
    assert first == second
    forbidden = (str(ROOT), str(tmp_path), str(Path.home()), "/tmp/", "/work/")
    for relative, content in first.items():
        if relative.endswith(".json"):
            assert not any(path in content.decode() for path in forbidden), relative


# --- wrong folders: one problem each, at its key --------------------------------------------------------


@pytest.mark.parametrize(
    ("repository", "setup", "expected"),
    [
        ("nowhere", None, "no such folder: nowhere (relative to the project root"),
        ("charts", None, f"charts has no {OPERATOR}; it is empty. Put the packaged chart there"),
        ("charts", "other", f"charts has no {OPERATOR}; it holds gpu-operator-v26.7.0.tgz"),
        ("charts", "folder", f"charts/{OPERATOR} is a folder: a chart folder holds packaged charts"),
        ("charts", "garbage", f"charts/{OPERATOR}: not a packaged chart (a gzipped tar archive"),
        ("charts", "wrong", f"charts/{OPERATOR}: is gpu-operator v26.7.0, not gpu-operator v26.3.3"),
        ("charts", "flat", f"charts/{OPERATOR}: not a packaged chart: no <chart>/Chart.yaml at the top"),
        ("/srv/charts", None, "is an absolute path: name the chart folder relative to the project root"),
        ("~/charts", None, "is an absolute path"),
        ("../charts", None, "leaves the project: a chart folder is inside the project root"),
        ("charts/../../charts", None, "leaves the project"),
        ("outside", "link", "outside leads out of the project (a link)"),
        ("ftp://charts.example/nvidia", None, "ftp:// is not a chart repository address"),
        ("https://someone@charts.example/nvidia", None, "must not embed credentials"),
    ],
)
def test_each_wrong_chart_folder_is_one_problem_at_its_key_with_its_line(
    tmp_path: Path, repository: str, setup: str | None, expected: str
) -> None:
    paths = _project(tmp_path, cluster(gpuOperator={"repository": repository}))
    charts = tmp_path / "proj" / "charts"
    if setup == "other":
        _archive(tmp_path, "gpu-operator-v26.7.0.tgz")
    elif setup == "folder":
        (charts / OPERATOR).mkdir()
    elif setup == "garbage":
        _archive(tmp_path, data=b"not an archive")
    elif setup == "wrong":
        _archive(tmp_path, data=chart("gpu-operator", "v26.7.0"))
    elif setup == "flat":
        _archive(tmp_path, data=pack({"Chart.yaml": b"name: gpu-operator\nversion: v26.3.3\n"}))
    elif setup == "link":
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "proj" / "outside").symlink_to(tmp_path / "elsewhere")
    problems = _problems(paths, tmp_path)
    assert len(problems) == 1, problems
    assert problems[0].startswith("proj/stacks/test.yaml: gpuOperator.repository: "), problems
    assert expected in problems[0]
    lines = (paths.stacks_dir / "test.yaml").read_text(encoding="utf-8").splitlines()
    line = next(number for number, text in enumerate(lines, 1) if text.startswith("  repository:"))
    assert problems[0].endswith(f"(line {line}, column 3)")  # the key's own line


def test_a_folder_inside_the_project_through_a_link_is_fine(tmp_path: Path) -> None:
    paths = _project(tmp_path, cluster(gpuOperator={"repository": "vendor/nvidia"}))
    _archive(tmp_path)
    (tmp_path / "proj" / "vendor").mkdir()
    (tmp_path / "proj" / "vendor" / "nvidia").symlink_to(tmp_path / "proj" / "charts")
    assert _plan(paths).operator_release.archive is not None


# --- the fleet's mirror ---------------------------------------------------------------------------------


def test_the_fleets_mirror_can_be_a_local_chart_folder(tmp_path: Path) -> None:
    paths = _project(tmp_path, cluster(), charts={"mirror": "charts"})
    _archive(tmp_path)
    _archive(tmp_path, "dra-driver-nvidia-gpu-0.4.1.tgz")
    plan = _plan(paths)
    assert [(r.repository, r.archive.archive if r.archive else None) for r in plan.releases] == [
        (None, f"charts/{OPERATOR}"),
        (None, "charts/dra-driver-nvidia-gpu-0.4.1.tgz"),
    ]
    # A cluster's own repository wins over the mirror.
    own = cluster(name="own", draDriver={"repository": "oci://registry.corp.example/dra"})
    paths = _project(tmp_path, cluster(), own, charts={"mirror": "charts"})
    assert load_fleet(paths.catalog, paths.stacks_dir).clusters[0].releases[1].repository == (
        "oci://registry.corp.example/dra"
    )


def test_a_mirror_folder_is_checked_once_at_the_catalog_and_each_missing_archive_at_its_cluster(
    tmp_path: Path,
) -> None:
    paths = _project(tmp_path, cluster(), charts={"mirror": "mirror"})
    problems = _problems(paths, tmp_path)
    assert len(problems) == 1, problems
    assert problems[0].startswith("proj/catalog/gpu-catalog.yaml: charts.mirror: no such folder: mirror")
    assert "(line " in problems[0]
    paths = _project(tmp_path, cluster(), charts={"mirror": "charts"})
    _archive(tmp_path)
    (problem,) = _problems(paths, tmp_path)
    assert problem.startswith(
        "proj/stacks/test.yaml: draDriver.version: from the fleet's mirror, a local chart folder: charts has no "
        f"dra-driver-nvidia-gpu-0.4.1.tgz; it holds {OPERATOR}"
    )


def test_the_environment_names_the_fleets_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from themelio_gpu.engine import selected
    from themelio_gpu.outputs.stack_inputs import fleet_key

    paths = _project(tmp_path, cluster(), charts={"mirror": "https://charts.corp.example/nvidia"})
    key = fleet_key(paths.catalog, selected())
    monkeypatch.setenv(CHART_MIRROR_ENV, "http://127.0.0.1:8080")
    assert {r.repository for r in _plan(paths).releases} == {"http://127.0.0.1:8080"}
    assert fleet_key(paths.catalog, selected()) != key  # a cluster file left unread would miss the new mirror
    monkeypatch.setenv(CHART_MIRROR_ENV, "charts")
    _archive(tmp_path)
    _archive(tmp_path, "dra-driver-nvidia-gpu-0.4.1.tgz")
    assert all(r.archive is not None for r in _plan(paths).releases)
    monkeypatch.setenv(CHART_MIRROR_ENV, "https://user:password@mirror.example")
    assert _problems(paths, tmp_path) == [
        "environment: THEMELIO_CHART_MIRROR: must not embed credentials (a user name or password): give the helm "
        "provider its repository login the way your pipeline gives secrets; no secret may reach the synthesized "
        "output"
    ]


# --- an archive edited behind an unchanged cluster file ------------------------------------------------


def test_an_edited_archive_writes_its_stack_again_and_replaces_its_asset(tmp_path: Path) -> None:
    paths = _project(tmp_path, cluster(gpuOperator={"repository": "charts"}), cluster(name="other"))
    _archive(tmp_path)
    out = tmp_path / "out"
    _, first = synthesize_files(paths, out, progress=None)
    assert first.written == ("other", "test")
    old_chart = _stack(out)["resource"]["helm_release"]["gpu_operator"]["chart"]
    _, again = synthesize_files(paths, out, progress=None)
    assert again.written == ()  # planned again (it ships a chart), not written: the same archive
    _archive(tmp_path, data=chart("gpu-operator", "v26.3.3", **{"cm.yaml": "kind: ConfigMap\n"}))
    _, edited = synthesize_files(paths, out, progress=None)
    assert edited.written == ("test",)
    new_chart = _stack(out)["resource"]["helm_release"]["gpu_operator"]["chart"]
    assert new_chart != old_chart  # a new path: Terraform sees another chart, though its version is the same
    assets = [p for p in _files(out / "stacks" / "test") if p.startswith("assets/")]
    assert assets == [new_chart]  # the old copy is gone
    full = tmp_path / "full"
    synthesize_files(paths, full, progress=None, full=True)
    assert {k: v for k, v in _files(out).items() if k.startswith("stacks/")} == {
        k: v for k, v in _files(full).items() if k.startswith("stacks/")
    }
    # Back to a chart from a repository: the stack's assets/ goes.
    (paths.stacks_dir / "test.yaml").write_text(yaml.safe_dump(cluster()), encoding="utf-8")
    synthesize_files(paths, out, progress=None)
    assert not (out / "stacks" / "test" / "assets").exists()


def test_check_names_a_changed_asset_by_size_and_sha256(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths, out = _synthesized_with_local_chart(tmp_path, "out")
    flags = ["check", *_fleet(paths), "--against", str(out)]
    assert main(flags) == 0
    (asset,) = (out / "stacks" / "test" / "assets").rglob("*.tgz")
    asset.write_bytes(b"tampered")
    assert main(flags) == 1
    report = capsys.readouterr().out
    assert f"  changed: stacks/test/{asset.relative_to(out / 'stacks' / 'test').as_posix()}" in report
    assert f"bytes, SHA-256 {hashlib.sha256(b'tampered').hexdigest()}" in report


def test_a_removed_clusters_folder_with_its_assets_is_removed(tmp_path: Path) -> None:
    paths = _project(tmp_path, cluster(gpuOperator={"repository": "charts"}), cluster(name="other"))
    _archive(tmp_path)
    out = tmp_path / "out"
    synthesize_files(paths, out, progress=None)
    (paths.stacks_dir / "test.yaml").unlink()
    _, result = synthesize_files(paths, out, progress=None)
    assert result.removed == ("test",)
    assert not (out / "stacks" / "test").exists()


def test_changed_sees_an_archive_change_behind_an_unchanged_cluster_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths, base = _synthesized_with_local_chart(tmp_path, "base")
    flags = ["changed", *_fleet(paths), "--base", str(base)]
    edited = chart("gpu-operator", "v26.3.3", **{"cm.yaml": "kind: ConfigMap\n"})
    # Each run keeps what it checked in the cache (the same one here): the archive decides every time.
    for data, status in ((edited, "changed"), (None, "unchanged"), (edited, "changed")):
        _archive(tmp_path, data=data)
        main([*flags, "--format", "json"])
        (stack,) = json.loads(capsys.readouterr().out)["stacks"]
        assert stack["status"] == status
        if status == "changed":
            assert [(r["address"], r["action"]) for r in stack["resources"]] == [
                ("helm_release.gpu_operator", "update")
            ]


# --- charts fetch, the sandbox ------------------------------------------------------------------------------


def test_charts_fetch_unpacks_a_local_chart_into_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _project(tmp_path, cluster(gpuOperator={"repository": "charts"}), charts={"mirror": "charts"})
    _archive(tmp_path)
    _archive(tmp_path, "dra-driver-nvidia-gpu-0.4.1.tgz")
    cache = tmp_path / "cache"
    flags = [*_fleet(paths), "--cache", str(cache)]
    assert main(["charts", "fetch", *flags]) == 0  # no helm needed: nothing is pulled
    assert "gpu-operator v26.3.3: unpacked from charts/gpu-operator-v26.3.3.tgz" in capsys.readouterr().out
    assert sorted(p.name for p in cache.iterdir()) == ["dra-driver-nvidia-gpu-0.4.1", "gpu-operator-v26.3.3"]
    assert (cache / "gpu-operator-v26.3.3" / "Chart.yaml").is_file()


def test_the_sandbox_deploys_through_the_fleets_mirror_and_ships_local_charts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from themelio_gpu.sandbox import deploy, inventory
    from themelio_gpu.sandbox.cluster import Sandbox
    from themelio_gpu.sandbox.components import chart_repository

    crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x.example.com}\n"
    archive = pack(
        {
            "gpu-operator/Chart.yaml": b"apiVersion: v2\nname: gpu-operator\nversion: v26.3.3\n",
            "gpu-operator/crds/x.yaml": crd.encode(),
        }
    )
    paths = _project(tmp_path, cluster(gpuOperator={"repository": "charts"}))
    _archive(tmp_path, data=archive)
    plan = _plan(paths)
    assert not chart_repository.mirror_is_local_folder(plan)
    assert chart_repository.own_repositories(plan) == {}
    sandbox = Sandbox(plan.name)
    monkeypatch.setattr(Sandbox, "state", lambda self: {"chartRepository": "http://127.0.0.1:4321"})
    assert deploy.mirror_environment(plan, sandbox) == {CHART_MIRROR_ENV: "http://127.0.0.1:4321"}
    # The override file points Terraform at the sandbox, not at a chart repository: the stack's own sources stay.
    stack = {
        "resource": {"helm_release": {"gpu_operator": {"chart": "./assets/x.tgz"}, "dra": {"repository": "u"}}}
    }
    assert "resource" not in deploy._override(plan, sandbox, stack, [])
    # What Helm keeps after uninstall is read from the archive the stack installs.
    assert "CustomResourceDefinition//x.example.com" in inventory.kept_by_helm(plan, tmp_path / "no-cache")
    # A repository the cluster file names itself is out of the sandbox's reach: that release alone installs from
    # the sandbox's repository, by the override file; the other still comes through the mirror.
    own = "https://charts.corp.example/nvidia"
    plan = _plan(_project(tmp_path, cluster(gpuOperator={"repository": own})))
    assert chart_repository.own_repositories(plan) == {own: "gpuOperator.repository"}
    stack = {"resource": {"helm_release": {"gpu_operator": {"repository": own}, "dra": {"repository": "u"}}}}
    replaced = deploy._override(plan, sandbox, stack, [])["resource"]
    assert replaced == {"helm_release": {"gpu_operator": {"repository": "http://127.0.0.1:4321"}}}
    # A fleet whose mirror is a local chart folder keeps it in the sandbox too.
    paths = _project(tmp_path, cluster(), charts={"mirror": "charts"})
    _archive(tmp_path, "dra-driver-nvidia-gpu-0.4.1.tgz")
    plan = _plan(paths)
    assert chart_repository.mirror_is_local_folder(plan)
    assert deploy.mirror_environment(plan, sandbox) == {}


def test_sandbox_check_covers_a_cluster_shipping_a_local_chart(local_fleet: Fleet) -> None:
    from themelio_gpu.sandbox.coverage import covering, features

    (plan,) = local_fleet.clusters
    assert "a chart from a local chart folder" in features(plan)
    assert [p.name for p, _ in covering(local_fleet.clusters)] == ["gpu-airgap"]


def test_atlantis_plans_a_stack_again_when_a_chart_it_ships_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = {"type": "s3", "bucket": "state", "region": "eu-central-1"}
    _project(
        tmp_path, cluster(gpuOperator={"repository": "charts"}, backend=s3), cluster(name="other", backend=s3)
    )
    _archive(tmp_path)
    monkeypatch.chdir(tmp_path / "proj")  # the repository root
    inputs = ["--catalog", str(DEFAULT_CATALOG), "--stacks-dir", str(DEFAULT_STACKS_DIR)]
    assert main(["pipeline", "atlantis", *inputs, "--output", "atlantis.yaml"]) == 0
    projects = yaml.safe_load(Path("atlantis.yaml").read_text(encoding="utf-8"))["projects"]
    # As Atlantis matches them: each pattern joined to the project's folder.
    patterns = {
        p["name"]: {os.path.normpath(f"{p['dir']}/{m}") for m in p["autoplan"]["when_modified"]} for p in projects
    }
    assert f"charts/{OPERATOR}" in patterns["test"]
    assert f"charts/{OPERATOR}" not in patterns["other"]
