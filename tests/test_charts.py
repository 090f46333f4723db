"""`charts fetch` and `charts known-values`, as a fork uses them: the pinned charts pulled with the real helm
(from a real chart repository served here, there being no network to NVIDIA's), offline a message saying what
to do, `--from` a folder, and a chart version without a table fetched, tabulated and then accepted."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.builders import cluster, write_fleet
from tests.conftest import ROOT
from tests.requirements import binary, shared_path
from themelio_gpu.charts.cache import ChartRef, pull_command
from themelio_gpu.cli import main
from themelio_gpu.plan.helm import known_values

CHARTS = ("gpu-operator-v26.3.3", "dra-driver-nvidia-gpu-0.4.1")
"""The charts the builders' cluster pins (the default versions)."""


@pytest.fixture
def helm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    for name in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))  # helm's own caches: not the user's
    return binary("helm", "HELM")


@pytest.fixture
def reference_charts() -> Path:
    return shared_path("reference", "charts")


@pytest.fixture
def chart_repository(helm: str, reference_charts: Path, tmp_path: Path) -> Iterator[str]:
    """A real HTTP chart repository serving the pinned charts, packaged and indexed with helm."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for folder in CHARTS:
        subprocess.run(
            [helm, "package", str(reference_charts / folder), "-d", str(repo)], check=True, capture_output=True
        )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(repo))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    subprocess.run([helm, "repo", "index", str(repo), "--url", url], check=True, capture_output=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def test_the_pull_command_for_each_kind_of_repository(tmp_path: Path) -> None:
    https = ChartRef("gpu-operator", "v26.3.3", "https://helm.ngc.nvidia.com/nvidia")
    assert pull_command(https, tmp_path) == [
        "pull", "gpu-operator", "--repo", "https://helm.ngc.nvidia.com/nvidia", "--version", "v26.3.3",
        "--untar", "--untardir", str(tmp_path),
    ]  # fmt: skip
    oci = ChartRef("dra-driver-nvidia-gpu", "0.4.1", "oci://registry.k8s.io/dra-driver-nvidia/charts/")
    assert pull_command(oci, tmp_path) == [
        "pull", "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", "--version", "0.4.1",
        "--untar", "--untardir", str(tmp_path),
    ]  # fmt: skip


def test_fetch_pulls_what_the_clusters_pin_once_and_verify_renders_from_the_cache(
    chart_repository: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = {"gpuOperator": {"repository": chart_repository}, "draDriver": {"repository": chart_repository}}
    catalog, stacks = write_fleet(tmp_path, [cluster(name="east", **pinned), cluster(name="west", **pinned)])
    cache = tmp_path / "cache"
    monkeypatch.setenv("THEMELIO_CHART_CACHE", str(cache))
    assert main(["charts", "fetch", "--stacks-dir", str(stacks)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"dra-driver-nvidia-gpu 0.4.1: pulled from {chart_repository} into {cache}/dra-driver-nvidia-gpu-0.4.1",
        f"gpu-operator v26.3.3: pulled from {chart_repository} into {cache}/gpu-operator-v26.3.3",
    ]
    assert sorted(p.name for p in cache.iterdir()) == sorted(CHARTS)  # nothing half-fetched beside them
    assert main(["charts", "fetch", "--stacks-dir", str(stacks)]) == 0
    assert "gpu-operator v26.3.3: already in" in capsys.readouterr().out
    assert main(["verify", "--catalog", str(catalog), "--stacks-dir", str(stacks)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"(charts from {cache})")


def test_offline_fetch_fails_saying_what_to_do(
    helm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    oci = "oci://127.0.0.1:9/dra-driver-nvidia/charts"  # nothing listens there: helm says what it asked for
    unreachable = {"gpuOperator": {"repository": "http://127.0.0.1:9"}, "draDriver": {"repository": oci}}
    _, stacks = write_fleet(tmp_path, [cluster(**unreachable)])
    cache = tmp_path / "cache"
    assert main(["charts", "fetch", "--stacks-dir", str(stacks), "--cache", str(cache)]) == 1
    out = capsys.readouterr().out
    assert (
        f"dra-driver-nvidia-gpu 0.4.1: FAILED: cannot pull chart dra-driver-nvidia-gpu 0.4.1 from {oci}: " in out
    )
    assert "127.0.0.1:9/v2/dra-driver-nvidia/charts/dra-driver-nvidia-gpu/manifests/0.4.1" in out
    assert "gpu-operator v26.3.3: FAILED: cannot pull chart gpu-operator v26.3.3 from http://127.0.0.1:9: " in out
    assert out.rstrip().splitlines()[-1] == (
        "Without access to the charts' repositories (NVIDIA's are helm.ngc.nvidia.com and registry.k8s.io; helm "
        f"honours HTTPS_PROXY): run `charts fetch` where they can be reached and copy the {cache} folder here, or "
        "fetch from a folder of chart folders named <chart>-<version> (the <chart>/ folder `helm pull --untar` "
        "makes, renamed) with `charts fetch --from DIR`"
    )
    assert list(cache.iterdir()) == []


def test_fetch_from_a_folder_copies_every_known_chart(
    reference_charts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    assert main(["charts", "fetch", "--all-known", "--from", str(reference_charts), "--cache", str(cache)]) == 0
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        p.name for p in reference_charts.iterdir() if (p / "Chart.yaml").is_file()
    )
    assert f"gpu-operator v26.7.0: copied from {reference_charts} into {cache}/gpu-operator-v26.7.0" in (
        capsys.readouterr().out
    )
    assert os.access(cache / "gpu-operator-v26.7.0" / "values.yaml", os.W_OK)  # the cache is the user's to clean
    shutil.rmtree(cache)
    _, stacks = write_fleet(tmp_path, [cluster(gpuOperator={"version": "v26.7.0"})])
    sparse = tmp_path / "sparse"
    sparse.mkdir()
    (sparse / "gpu-operator-v26.7.0").symlink_to(reference_charts / "gpu-operator-v26.7.0")
    assert (
        main(["charts", "fetch", "--stacks-dir", str(stacks), "--from", str(sparse), "--cache", str(cache)]) == 1
    )
    assert (
        f"dra-driver-nvidia-gpu 0.4.1: FAILED: {sparse}/dra-driver-nvidia-gpu-0.4.1: no such chart folder (--from "
        "holds <chart>-<version> folders)"
    ) in capsys.readouterr().out
    (cache / "gpu-operator-v26.7.0" / "Chart.yaml").write_text("name: gpu-operator\nversion: v26.6.0\n")
    assert (
        main(["charts", "fetch", "--stacks-dir", str(stacks), "--from", str(sparse), "--cache", str(cache)]) == 1
    )
    assert (
        f"gpu-operator v26.7.0: FAILED: {cache}/gpu-operator-v26.7.0/Chart.yaml: is gpu-operator v26.6.0, not "
        f"gpu-operator v26.7.0; remove {cache}/gpu-operator-v26.7.0 and fetch again"
    ) in capsys.readouterr().out
    assert main(["charts", "fetch", "--from", str(tmp_path / "nope")]) == 2
    assert f"command line: --from {tmp_path}/nope: no such folder of chart folders" in capsys.readouterr().err


def test_fetch_without_helm_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("HELM", raising=False)
    monkeypatch.setenv("THEMELIO_TOOLS_CACHE", str(tmp_path / "no-tools"))
    assert main(["charts", "fetch", "--cache", str(tmp_path / "cache")]) == 2
    assert capsys.readouterr().err.startswith(
        "charts fetch: helm is not installed: charts fetch pulls the charts with `helm pull`. Run `make "
        "sandbox-tools` (builds helm v3."
    )


def test_without_helm_on_path_the_helm_the_tool_build_made_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from themelio_gpu.charts.helm import helm_binary
    from themelio_gpu.sandbox.tools import load_tools

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("HELM", raising=False)
    monkeypatch.setenv("THEMELIO_TOOLS_CACHE", str(tmp_path / "tools"))
    built = load_tools()["helm"].path("helm")
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    assert helm_binary() == str(built)


def test_a_tables_check_and_a_chart_that_is_not_there(
    helm: str, reference_charts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = reference_charts / "gpu-operator-v26.7.0"
    assert main(["charts", "known-values", "gpu-operator", "v26.7.0", "--chart-dir", str(chart), "--check"]) == 0
    assert main(["charts", "known-values", "gpu-operator", "v26.3.3", "--chart-dir", str(chart), "--check"]) == 2
    assert "Chart.yaml: is gpu-operator v26.7.0, not gpu-operator v26.3.3" in capsys.readouterr().err
    assert main(["charts", "known-values", "gpu-operator", "v26.8.0", "--cache", str(tmp_path)]) == 2
    assert (
        f"{tmp_path}/gpu-operator-v26.8.0: no such chart folder: fetch it first (`python -m themelio_gpu charts fetch`)"
    ) in capsys.readouterr().err


def test_a_chart_version_without_a_table_is_fetched_tabulated_and_then_accepted(
    helm: str, reference_charts: Path, tmp_path: Path
) -> None:
    """A fork upgrading to a GPU Operator release this project has no table for, in a copy of the package (the
    table is written into it)."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "themelio_gpu", project / "themelio_gpu", ignore=shutil.ignore_patterns("__pycache__"))
    # The new release: v26.7.0's chart, published as v26.8.0.
    published = tmp_path / "published" / "gpu-operator-v26.8.0"
    shutil.copytree(reference_charts / "gpu-operator-v26.7.0", published)
    published.chmod(0o755)
    meta = yaml.safe_load((published / "Chart.yaml").read_text(encoding="utf-8"))
    (published / "Chart.yaml").chmod(0o644)
    (published / "Chart.yaml").write_text(yaml.safe_dump({**meta, "version": "v26.8.0"}), encoding="utf-8")
    catalog, stacks = write_fleet(tmp_path, [cluster(gpuOperator={"version": "v26.8.0"})])
    inputs = ["--catalog", str(catalog), "--stacks-dir", str(stacks)]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "THEMELIO_CHART_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(project)}
        return subprocess.run(
            [sys.executable, "-m", "themelio_gpu", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    refused = run("validate", *inputs)
    assert refused.returncode == 2
    assert (
        "gpuOperator.version: no known values table for chart 'gpu-operator' version 'v26.8.0' (tables exist for "
        "v26.3.3, v26.7.0). To add it: `python -m themelio_gpu charts fetch` (pulls the versions your clusters pin "
        "into the chart cache), then `python -m themelio_gpu charts known-values gpu-operator v26.8.0` (writes "
        "themelio_gpu/plan/helm/tables/gpu-operator-v26.8.0.json; commit it); see docs/charts.md"
    ) in refused.stderr
    fetched = run("charts", "fetch", "--stacks-dir", str(stacks), "--from", str(published.parent))
    assert fetched.returncode == 1, fetched.stdout + fetched.stderr  # the DRA chart is not in that folder
    assert "gpu-operator v26.8.0: copied from" in fetched.stdout
    written = run("charts", "known-values", "gpu-operator", "v26.8.0")
    assert written.returncode == 0, written.stderr
    table = Path("themelio_gpu/plan/helm/tables/gpu-operator-v26.8.0.json")
    assert written.stdout.startswith(f"wrote {table}: commit it")
    assert (project / table).is_file() and not (ROOT / table).exists()
    accepted = run("validate", *inputs)
    assert accepted.returncode == 0, accepted.stderr
    assert run("charts", "known-values", "gpu-operator", "v26.8.0", "--check").returncode == 0


def test_known_values_only_for_a_chart_a_cluster_installs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: foo\nversion: 1.0.0\n", encoding="utf-8")
    assert main(["charts", "known-values", "foo", "1.0.0", "--chart-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "charts known-values: foo: not a chart a cluster installs; the charts are gpu-operator, "
        "dra-driver-nvidia-gpu, nvidia-dra-driver-gpu\n"
    )
    assert not (known_values.TABLES_DIR / "foo-1.0.0.json").exists()


def test_a_broken_table_file_is_one_message_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster()])
    tables = tmp_path / "tables"
    shutil.copytree(known_values.TABLES_DIR, tables)
    (tables / "x-1.json").write_text('{"chart": "x"}', encoding="utf-8")
    caches = (known_values._tables, known_values.known_chart_versions, known_values._table)
    monkeypatch.setattr(known_values, "TABLES_DIR", tables)
    for cache in caches:
        cache.cache_clear()
    try:
        assert main(["validate", "--catalog", str(catalog), "--stacks-dir", str(stacks)]) == 2
    finally:
        monkeypatch.undo()
        for cache in caches:
            cache.cache_clear()
    err = capsys.readouterr().err
    assert "x-1.json: not a known-values table ('version'); write it again with" in err
    assert "Traceback" not in err
