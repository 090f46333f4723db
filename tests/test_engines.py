"""Two engines behind one switch (themelio_gpu/engine.py): cdktf 0.21 by default, CDK Terrain with
THEMELIO_ENGINE=cdktn.

- every example and fixture fleet synthesized by both: the outputs are equal as JSON once the expected
  differences (verify/engines.py, each commented there) are removed, and nothing else differs;
- an engine name that is not one is a clear error for every command;
- the versions each engine relies on are the installed ones (a re-lock that moves one fails here);
- CDK Terrain gets its own creation-stack switch in its kernel's environment only, and keeps its preparing
  pass;
- providers.py's typed imports and the table it imports from at run time name the same classes.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT
from tests.test_provider_loading import _env_without_preload
from themelio_gpu.engine import ENGINES, ENV, EngineSettingError, selected
from themelio_gpu.verify.engines import STACK_DIFFERENCES, compare_outputs, synthesize_with

FLEETS = sorted(p.name for p in (FIXTURES / "fleets").iterdir() if (p / "catalog").is_dir())


@pytest.mark.parametrize("fleet", FLEETS)
def test_both_engines_synthesize_the_same_stacks_but_for_the_expected_differences(
    fleet: str, tmp_path: Path
) -> None:
    folder = FIXTURES / "fleets" / fleet
    for name in ENGINES:
        synthesize_with(name, folder / "catalog" / "gpu-catalog.yaml", folder / "stacks", tmp_path / name)
    result = compare_outputs(tmp_path / "cdktf", tmp_path / "cdktn")
    assert result.stacks, "the fleet has stacks"
    assert result.unexpected == ()


def test_an_unexpected_difference_is_reported_with_its_path(tmp_path: Path) -> None:
    for name, metadata_version, extra in (("cdktf", "0.21.0", {}), ("cdktn", "0.24.0", {"x": 1})):
        stack = tmp_path / name / "stacks" / "one"
        stack.mkdir(parents=True)
        body = {
            "//": {"metadata": {"version": metadata_version}},
            "resource": {"helm_release": {"r": {"a": 1, **extra}}},
        }
        (stack / "cdk.tf.json").write_text(json.dumps(body))
        (tmp_path / name / "manifest.json").write_text(json.dumps({"version": metadata_version, "stacks": {}}))
    result = compare_outputs(tmp_path / "cdktf", tmp_path / "cdktn")
    assert result.unexpected == ("stacks/one/cdk.tf.json: resource.helm_release.r.x: only with cdktn",)
    assert len(STACK_DIFFERENCES) == 4  # the list docs/cdk-terrain.md explains, entry by entry


def test_the_engine_switch_takes_cdktf_or_cdktn_and_refuses_anything_else(monkeypatch: pytest.MonkeyPatch) -> None:
    assert selected("").name == "cdktf"
    assert selected(" CDKTN ").name == "cdktn"
    monkeypatch.delenv(ENV, raising=False)
    assert selected().name == "cdktf"
    with pytest.raises(
        EngineSettingError, match=r"^THEMELIO_ENGINE: 'terraform-cdk' is not an engine; allowed: cdktf"
    ):
        selected("terraform-cdk")


def test_a_wrong_engine_stops_every_command_before_any_work() -> None:
    result = subprocess.run(
        [sys.executable, "main.py", "--quiet"],
        cwd=ROOT,
        env={**_env_without_preload(), ENV: "cdk"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("THEMELIO_ENGINE: 'cdk' is not an engine;")


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_the_versions_each_engine_relies_on_are_installed(name: str) -> None:
    engine = ENGINES[name]
    assert version(engine.distribution) == engine.version
    for bindings in (engine.kubernetes, engine.helm):
        assert version(bindings.distribution) == bindings.version
    pipfile = (ROOT / "Pipfile").read_text(encoding="utf-8")
    for distribution, pinned in (
        (engine.distribution, engine.version),
        *((b.distribution, b.version) for b in (engine.kubernetes, engine.helm)),
    ):
        assert f'{distribution} = "=={pinned}"' in pipfile, distribution


KERNEL_REPORT = """
import json, os, sys
from pathlib import Path
from themelio_gpu.constructs import providers
from themelio_gpu.constructs.gpu_cluster_stack import GpuClusterStack
(kernel,) = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
environ = dict(e.split(b"=", 1) for e in Path(f"/proc/{kernel}/environ").read_bytes().split(b"\\0") if b"=" in e)
print(json.dumps({
    "engine": providers.ENGINE.name,
    "kernel_switch": environ.get(b"CDKTN_DISABLE_CREATION_STACK", b"").decode(),
    "own_switch": os.environ.get("CDKTN_DISABLE_CREATION_STACK"),
    "skips_prepare": "prepare_stack" in vars(GpuClusterStack),
    "providers": [list(p) for p in (providers.KUBERNETES_PROVIDER, providers.HELM_PROVIDER)],
}))
"""


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_each_engine_gets_its_own_kernel_switches_and_keeps_or_skips_its_preparing_pass(name: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", KERNEL_REPORT],
        cwd=ROOT,
        env={**_env_without_preload("CDKTN_DISABLE_CREATION_STACK"), ENV: name},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["engine"] == name
    assert report["own_switch"] is None  # the kernel's alone: nothing else this process starts gets it
    if name == "cdktn":
        assert report["kernel_switch"] == "1"
        assert report["skips_prepare"] is False  # CDK Terrain's pass also validates: never skipped
        assert report["providers"] == [
            ["kubernetes", "hashicorp/kubernetes", "3.4.0"],
            ["helm", "hashicorp/helm", "3.3.0"],
        ]
    else:
        assert report["kernel_switch"] == ""
        assert report["skips_prepare"] is True
        assert report["providers"] == [
            ["kubernetes", "hashicorp/kubernetes", "2.38.0"],
            ["helm", "hashicorp/helm", "3.1.1"],
        ]


def test_providers_typed_imports_and_run_time_table_name_the_same_classes() -> None:
    source = (ROOT / "themelio_gpu" / "constructs" / "providers.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    typed: dict[tuple[str, str], set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module
                module = statement.module
                key = (
                    ("core", "")
                    if module == "cdktf"
                    else (module.split("_")[3].split(".")[0], module.split(".")[1])
                )
                typed.setdefault(key, set()).update(alias.name for alias in statement.names)
    from themelio_gpu.constructs import providers

    assert typed == {key: set(names) for key, names in providers._IMPORTS.items()}
    for names in providers._IMPORTS.values():
        assert all(isinstance(getattr(providers, name), type) for name in names)


def test_version_names_the_engine_and_both_bindings() -> None:
    for name, expected in (
        ("cdktf", "cdktf-cdktf-provider-kubernetes 12.1.1"),
        ("cdktn", "cdktn-provider-helm 15.1.0"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "themelio_gpu", "--version"],
            cwd=ROOT,
            env={**os.environ, ENV: name},
            capture_output=True,
            text=True,
            check=True,
        )
        assert f"engine {name}" in result.stdout and expected in result.stdout


def test_only_providers_py_imports_an_engine_or_its_bindings() -> None:
    # Anything else would load cdktf under CDK Terrain too (or the other way round): engine.py's one switch.
    engine_import = re.compile(
        r"^\s*(?:from|import)\s+(cdktf|cdktn)(?:_provider_\w+|_cdktf_provider_\w+)?\b", re.M
    )
    found = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "themelio_gpu").rglob("*.py"))
        if path.name != "providers.py" and engine_import.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []
