"""A fork edits its fleet exactly as the README's "How to ..." says, runs `make snapshots`, and the tests that
follow its fleet pass: proven on a copy of the project, with the README's own examples."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_STACKS, FIXTURE_SNAPSHOTS, ROOT, USER_SNAPSHOTS
from tests.requirements import SHARED
from themelio_gpu.render.schemas import schema_texts

README = ROOT / "README.md"


def howto_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n### {title}\n")
    end = text.find("\n### ", start + 1)
    return text[start : end if end != -1 else None]


def howto_yaml(title: str) -> str:
    """The first YAML example of a How-to section, as written in the README."""
    match = re.search(r"```yaml\n(.*?)```", howto_section(title), re.DOTALL)
    assert match is not None, f"no YAML example under '### {title}' in README.md"
    return match.group(1)


def copy_project(target: Path) -> Path:
    """What synthesis and the tests need, with the example fleet as the fork's own fleet (as a fork starts).

    The fleet is the fixture copy, not this checkout's catalog/ and stacks/: the README's examples are written
    for the example fleet, and this test must not change with anyone's fleet.
    """
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    shutil.copytree(ROOT / "themelio_gpu", target / "themelio_gpu", ignore=ignore)
    # The tests without this checkout's user-fleet snapshots: they belong to its fleet, not to the fork's.
    shutil.copytree(
        ROOT / "tests",
        target / "tests",
        ignore=lambda folder, names: [*ignore(folder, names), *_user_snapshots(names, folder)],
    )
    for file in ("main.py", "pyproject.toml", "Makefile", "cdktf.json", ".gitignore"):
        shutil.copy2(ROOT / file, target / file)
    shutil.copytree(EXAMPLE_CATALOG.parent, target / "catalog")
    shutil.copytree(EXAMPLE_STACKS, target / "stacks")
    for schema, text in schema_texts().items():
        (target / schema).write_text(text, encoding="utf-8")
    shutil.copytree(
        FIXTURE_SNAPSHOTS, target / USER_SNAPSHOTS.relative_to(ROOT)
    )  # the reviewed output of that same fleet
    if SHARED.is_dir():  # the fork's checkout has ../shared beside it, as this one does (CI)
        (target.parent / SHARED.name).symlink_to(SHARED, target_is_directory=True)
    return target


def _user_snapshots(names: list[str], folder: str) -> list[str]:
    return [USER_SNAPSHOTS.name] if Path(folder) == USER_SNAPSHOTS.parent and USER_SNAPSHOTS.name in names else []


def make_recipe(target: str) -> list[str]:
    """The pytest command of a Makefile target, run with this interpreter."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(rf"^{target}:.*\n\t(\$\(VENV\)/pytest .*)$", makefile, re.MULTILINE)
    assert recipe is not None, f"make {target} runs no pytest command"
    return [sys.executable, "-m", "pytest", *shlex.split(recipe.group(1))[1:]]


def pytest_in(project: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THEMELIO_")}  # the copy's own fleet
    env.update(PYTHONDONTWRITEBYTECODE="1", JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
    return subprocess.run(
        [*command, "-p", "no:cacheprovider"], cwd=project, env=env, capture_output=True, text=True, check=False
    )


def add_list_items(file: Path, items: dict[str, list[Any]]) -> None:
    data = yaml.safe_load(file.read_text(encoding="utf-8"))
    for key, values in items.items():
        data[key] = [*data.get(key, []), *values]
    file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def test_following_the_readme_how_to_keeps_the_fleet_tests_green(tmp_path: Path) -> None:
    project = copy_project(tmp_path / "fork")
    stacks = project / "stacks"
    catalog = project / "catalog" / "gpu-catalog.yaml"

    # Add an offering: an entry under `offerings:` (the catalog's only top-level key, so it goes at the end).
    offering = howto_yaml("Add an offering")
    first, _, entry = offering.partition("\n")
    assert first == "offerings:"
    catalog.write_text(catalog.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + entry, encoding="utf-8")
    (name,) = yaml.safe_load(offering)["offerings"]

    # Add a cluster: a new file named after it.
    cluster = howto_yaml("Add a cluster")
    new_cluster = yaml.safe_load(cluster)["name"]
    (stacks / f"{new_cluster}.yaml").write_text(cluster, encoding="utf-8")

    # Add a node pool: the README names the cluster file and the list items to add to it.
    pool_section = howto_section("Add a node pool")
    target = re.search(r"`stacks/([a-z0-9-]+\.yaml)`", pool_section)
    assert target is not None
    add_list_items(stacks / target.group(1), yaml.safe_load(howto_yaml("Add a node pool")))

    # Remove a cluster: delete its file (the first one the other steps did not touch).
    gone_file = next(
        p for p in sorted(stacks.glob("*.yaml")) if p.name not in (target.group(1), f"{new_cluster}.yaml")
    )
    gone = yaml.safe_load(gone_file.read_text(encoding="utf-8"))["name"]
    gone_file.unlink()

    fixture_snapshots = project / FIXTURE_SNAPSHOTS.relative_to(ROOT)
    fixture_before = {
        p.relative_to(fixture_snapshots): p.read_bytes() for p in fixture_snapshots.rglob("*.*") if p.is_file()
    }
    recorded = pytest_in(project, make_recipe("snapshots"))
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-3000:]

    snapshots = project / USER_SNAPSHOTS.relative_to(ROOT)
    # make snapshots names every file it added, changed or removed (git diff alone shows no new file).
    listed = recorded.stdout.partition("\nsnapshots: ")[2]
    user = USER_SNAPSHOTS.relative_to(ROOT).as_posix()
    pooled = yaml.safe_load((stacks / target.group(1)).read_text(encoding="utf-8"))["name"]
    for what, path in (
        ("added", f"stacks/{new_cluster}.cdk.tf.json"),
        ("added", f"catalog/clusters/{new_cluster}/kueue.yaml"),
        ("changed", f"stacks/{pooled}.cdk.tf.json"),
        ("removed", f"stacks/{gone}.cdk.tf.json"),
    ):
        assert f"\n  {what:<8}{user}/{path}\n" in listed, (what, path, listed[:3000])
    assert "fixture-fleet" not in listed  # the tool's own snapshots did not move
    again = pytest_in(project, [*make_recipe("snapshots")[:5], "tests/test_user_fleet.py"])
    assert "\nsnapshots: none added, changed or removed\n" in again.stdout, again.stdout[-3000:]

    stack_snapshots = {p.name for p in (snapshots / "stacks").iterdir()}
    assert f"{new_cluster}.cdk.tf.json" in stack_snapshots
    assert f"{gone}.cdk.tf.json" not in stack_snapshots
    assert name in (snapshots / "stacks" / f"{pooled}.cdk.tf.json").read_text(encoding="utf-8")
    waldur = snapshots / "catalog" / "clusters" / pooled / "waldur-quota-mapping.yaml"
    assert name in waldur.read_text(encoding="utf-8")
    assert not (snapshots / "catalog" / "clusters" / gone).exists()
    # The tool's own snapshots do not move with the user's fleet.
    assert {
        p.relative_to(fixture_snapshots): p.read_bytes() for p in fixture_snapshots.rglob("*.*") if p.is_file()
    } == fixture_before

    checked = pytest_in(project, make_recipe("check-fleet"))  # the README's edit loop
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert re.search(r"\d+ passed", checked.stdout) and "failed" not in checked.stdout


def edit_loop() -> str:
    """The commands the README's How to says to run after every change."""
    text = README.read_text(encoding="utf-8")
    start = text.index("After every change below:")
    match = re.search(r"```sh\n(.*?)```", text[start:], re.DOTALL)
    assert match is not None, "no command block after 'After every change below:' in README.md"
    return match.group(1)


def test_the_edit_loop_checks_the_fleet_alone_and_make_test_stays_whole() -> None:
    """After every edit the loop runs the tests that read the user's fleet (seconds), not the whole suite
    (minutes); `make test` still runs every test."""
    loop = [line.split("#")[0].strip() for line in edit_loop().splitlines()]
    assert "make check-fleet" in loop and "make test" not in loop
    recipe = make_recipe("check-fleet")
    assert [arg for arg in recipe[3:] if not arg.startswith("-")] == ["tests/test_user_fleet.py"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    whole = re.search(r"^test:.*\n\t(.*)$", makefile, re.MULTILINE)
    assert whole is not None
    command, *options = whole.group(1).split()
    assert command == "$(VENV)/pytest"  # every test under testpaths: options only, none that selects tests
    assert all(o.startswith("-") and not o.startswith(("-k", "-m", "--deselect", "--ignore")) for o in options)


FOREIGN_CATALOG = """\
# A fork's own fleet: no name (offering, class, product, quota key, cluster, pool) of the example's.
offerings:
  acme.example/l40s:
    deviceClass: l40s.gpu.acme.example
    product: l40s
    displayName: Acme L40S
    quota: {waldurComponent: acme_l40s}
  acme.example/h200-slice:
    deviceClass: h200-1g18gb.gpu.acme.example
    product: h200-141gb
    migProfile: 1g.18gb
    displayName: Acme H200 slice
    quota: {waldurComponent: acme_h200_slice, unit: slice}
"""


def foreign_cluster(name: str, version: str) -> dict[str, Any]:
    return {
        "name": name,
        "kubernetesVersion": version,
        "access": {"kubeconfig": {"path": "~/.kube/acme", "context": name}},
        "backend": {"type": "s3", "bucket": "acme-state", "region": "eu-north-1"},
        "offerings": ["acme.example/l40s", "acme.example/h200-slice"],
        "nodePools": [
            {"name": "render", "product": "l40s", "gpusPerNode": 4, "provisioning": {"provisioned": {}}},
            {
                "name": "sliced",
                "product": "h200-141gb",
                "gpusPerNode": 8,
                "mig": {"profile": "1g.18gb"},
                "provisioning": {"static": {"nodes": [f"{name}-h200-1"]}},
            },
        ],
    }


def test_a_fork_with_a_fleet_of_its_own_passes_the_fleet_tests_and_records_its_snapshots(tmp_path: Path) -> None:
    """Every example offering and cluster deleted and replaced: `make snapshots` (which runs the tool's own
    snapshot tests too) records the fork's clusters, in environment folders, and the fleet tests pass."""
    project = copy_project(tmp_path / "fork")
    shutil.rmtree(project / "catalog")
    shutil.rmtree(project / "stacks")
    (project / "catalog").mkdir()
    (project / "catalog" / "gpu-catalog.yaml").write_text(FOREIGN_CATALOG, encoding="utf-8")
    clusters = {"prod/acme-fra": ("acme-fra", "1.36"), "staging/acme-fra-staging": ("acme-fra-staging", "1.37")}
    for file, (name, version) in clusters.items():
        path = project / "stacks" / f"{file}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(foreign_cluster(name, version), sort_keys=False), encoding="utf-8")
    for schema, text in schema_texts().items():
        (project / schema).write_text(text, encoding="utf-8")

    fixture_snapshots = project / FIXTURE_SNAPSHOTS.relative_to(ROOT)
    fixture_before = {
        p.relative_to(fixture_snapshots): p.read_bytes() for p in fixture_snapshots.rglob("*.*") if p.is_file()
    }
    recorded = pytest_in(project, make_recipe("snapshots"))
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-3000:]

    snapshots = project / USER_SNAPSHOTS.relative_to(ROOT)
    assert sorted(p.name for p in (snapshots / "stacks").iterdir()) == [
        "acme-fra-staging.cdk.tf.json",
        "acme-fra.cdk.tf.json",
    ]
    assert sorted(p.name for p in (snapshots / "catalog" / "clusters").iterdir()) == [
        "acme-fra",
        "acme-fra-staging",
    ]
    assert "l40s.gpu.acme.example" in (snapshots / "stacks" / "acme-fra.cdk.tf.json").read_text(encoding="utf-8")
    assert "acme_h200_slice" in (
        snapshots / "catalog" / "clusters" / "acme-fra" / "waldur-quota-mapping.yaml"
    ).read_text(encoding="utf-8")
    # The tool's own snapshots do not move with the user's fleet.
    assert {
        p.relative_to(fixture_snapshots): p.read_bytes() for p in fixture_snapshots.rglob("*.*") if p.is_file()
    } == fixture_before

    checked = pytest_in(project, [sys.executable, "-m", "pytest", "-q", "tests/test_user_fleet.py"])
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert re.search(r"\d+ passed", checked.stdout) and "failed" not in checked.stdout


def test_a_fork_that_deleted_the_cluster_schema_is_told_how_to_write_it_again(tmp_path: Path) -> None:
    """`rm stacks/*` takes stacks/cluster.schema.json with the example files: the fleet's tests say so."""
    project = copy_project(tmp_path / "fork")
    for path in (project / "stacks").iterdir():
        path.unlink()
    test = "tests/test_user_fleet.py::test_committed_json_schemas_are_current"
    checked = pytest_in(project, [sys.executable, "-m", "pytest", "-q", test])
    assert checked.returncode == 1, checked.stdout[-3000:]
    assert (
        "stacks/cluster.schema.json is missing (deleting every file in stacks/ deletes it too): run `make schemas`"
        in checked.stdout
    )
    assert "FileNotFoundError" not in checked.stdout and "Traceback" not in checked.stdout
