"""Which files of the stacks folder are clusters: flat or one folder per environment, every YAML file accounted
for (a cluster, or an error naming it), each named after its cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.builders import EXAMPLE_CATALOG, cluster
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.plan.fleet import cluster_definition_files, load_fleet
from themelio_gpu.render.schemas import schema_texts


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def problems(tmp_path: Path, stacks: Path, catalog: Path = EXAMPLE_CATALOG) -> list[str]:
    with pytest.raises(InputError) as error:
        load_fleet(catalog, stacks)
    return [str(p).replace(f"{tmp_path}/", "") for p in error.value.problems]


def test_clusters_flat_and_in_environment_folders_make_one_fleet(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    write(stacks / "lab.yaml", cluster(name="lab"))
    write(stacks / "prod" / "prod-east.yaml", cluster(name="prod-east"))
    write(stacks / "prod" / "prod-west.YAML", cluster(name="prod-west"))  # any case of the suffix
    write(stacks / "staging" / "staging-east.yml", cluster(name="staging-east"))
    # Not YAML, or hidden: left alone.
    write(stacks / "README.md", "# our clusters\n")
    write(stacks / "cluster.schema.json", "{}")
    write(stacks / "prod" / "notes.txt", "x")
    write(stacks / ".pending.yaml", "not: read")
    write(stacks / ".git" / "x.yaml", "not: read")
    write(stacks / "prod" / ".drafts" / "deep.yaml", "not: read")
    fleet = load_fleet(EXAMPLE_CATALOG, stacks)
    assert [(c.name, c.file) for c in fleet.clusters] == [
        ("lab", f"{stacks}/lab.yaml"),
        ("prod-east", f"{stacks}/prod/prod-east.yaml"),
        ("prod-west", f"{stacks}/prod/prod-west.YAML"),
        ("staging-east", f"{stacks}/staging/staging-east.yml"),
    ]


def test_a_yaml_file_deeper_than_one_folder_is_an_error_naming_it(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    write(stacks / "prod" / "prod-east.yaml", cluster(name="prod-east"))
    write(stacks / "prod" / "eu" / "prod-fra.yaml", cluster(name="prod-fra"))
    write(stacks / "prod" / "eu" / "README.md", "fine\n")
    assert problems(tmp_path, stacks) == [
        "stacks/prod/eu/prod-fra.yaml: too deep to be read: cluster files go in stacks/ or one folder below it "
        "(stacks/<environment>/<cluster>.yaml); move it up, or out of stacks/ if it is no cluster"
    ]


def test_a_file_named_otherwise_than_its_cluster_is_refused_with_how_to_fix(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    write(stacks / "east.yaml", cluster(name="gpu-east"))
    (found,) = problems(tmp_path, stacks)
    assert found.startswith(
        "stacks/east.yaml: name: the cluster gpu-east is defined in east.yaml: a cluster file is named after its "
        "cluster (the name is its stack and the key of its Terraform state). Rename the file to gpu-east.yaml; "
        "or, if east is the name you mean, set name: east (a new name is a new stack, whose state starts empty)"
    ), found
    assert found.endswith("(line 8, column 1)")  # name: in the file yaml.safe_dump writes


def test_one_name_in_two_environment_folders_is_refused(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    write(stacks / "prod" / "gpu.yaml", cluster(name="gpu"))
    write(stacks / "staging" / "gpu.yaml", cluster(name="gpu"))
    assert problems(tmp_path, stacks) == [
        "stacks/staging/gpu.yaml: name: cluster 'gpu' is also defined in stacks/prod/gpu.yaml (line 8, column 1)"
    ]


def test_yaml_files_that_are_no_cluster_are_errors_not_ignored(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    write(stacks / "gpu.yaml", cluster(name="gpu"))
    (stacks / "moved-catalog.yaml").write_text(EXAMPLE_CATALOG.read_text(encoding="utf-8"), encoding="utf-8")
    schema = json.loads(schema_texts()[Path("stacks/cluster.schema.json")])
    write(stacks / "cluster.schema.yaml", schema)
    write(stacks / "values.yaml", {"driver": {"enabled": False}, "toolkit": {"enabled": True}})
    write(stacks / "list.yaml", ["gpu-east", "gpu-west"])
    move = "every YAML file in stacks/ is read as a cluster definition: move this one out of stacks/"
    assert problems(tmp_path, stacks) == [
        "stacks/cluster.schema.yaml: not a cluster definition: its keys ($defs, $schema, additionalProperties, properties, required, title, ...) "
        "are none of a cluster's (name, kubernetesVersion, access, backend, "
        f"offerings, nodePools, ...); {move}",
        "stacks/list.yaml: not a cluster definition: the file holds a list, not a mapping of keys (name, "
        f"kubernetesVersion, access, backend, offerings, nodePools, ...); {move}",
        "stacks/moved-catalog.yaml: this is a GPU catalog, not a cluster definition (the catalog is one file, "
        f"--catalog); {move}",
        "stacks/values.yaml: not a cluster definition: its keys (driver, toolkit) are none of a cluster's (name, "
        f"kubernetesVersion, access, backend, offerings, nodePools, ...); {move}",
    ]


def test_a_cluster_file_moved_beside_the_catalog_is_an_error(tmp_path: Path) -> None:
    catalog = write(tmp_path / "catalog" / "gpu-catalog.yaml", EXAMPLE_CATALOG.read_text(encoding="utf-8"))
    write(tmp_path / "catalog" / "gpu-west.yaml", cluster(name="gpu-west"))
    write(tmp_path / "catalog" / "other.yaml", {"not": "a cluster"})  # not ours to judge: left alone
    stacks = tmp_path / "stacks"
    write(stacks / "gpu-east.yaml", cluster(name="gpu-east"))
    assert problems(tmp_path, stacks, catalog) == [
        "catalog/gpu-west.yaml: a cluster definition beside the catalog is not read: cluster files go in stacks/ "
        "(the catalog's folder holds the catalog alone); move it there"
    ]


def test_the_discovery_lists_the_cluster_files_in_order(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    for name in ("b.yaml", "a/c.yml", "a/d.Yaml", "e.json"):
        write(stacks / name, "x: 1\n")
    found = Problems()
    assert [p.relative_to(stacks).as_posix() for p in cluster_definition_files(stacks, found)] == [
        "a/c.yml",
        "a/d.Yaml",
        "b.yaml",
    ]
    assert not found


def test_pipes_devices_and_links_to_folders_are_errors_never_read(tmp_path: Path) -> None:
    import os

    stacks = tmp_path / "stacks"
    write(stacks / "lab.yaml", cluster(name="lab"))
    os.mkfifo(stacks / "gpu-z.yaml")  # reading it would wait forever
    (stacks / "gpu-d.yaml").symlink_to("/dev/zero")
    (stacks / "loop").symlink_to(".")  # back into stacks/
    write(tmp_path / "elsewhere" / "deep" / "far.yaml", cluster(name="far"))
    (stacks / "prod").mkdir()
    (stacks / "prod" / "gpu-t.yaml").symlink_to(tmp_path / "elsewhere")
    assert problems(tmp_path, stacks) == [
        "stacks/gpu-d.yaml: not a regular file: a cluster file is a plain YAML file",
        "stacks/gpu-z.yaml: not a regular file: a cluster file is a plain YAML file",
        "stacks/loop: a link to a folder is not followed: put the environment's folder itself here, or its files",
        "stacks/prod/gpu-t.yaml: a link to a folder is not followed: put the environment's folder itself here, "
        "or its files",
    ]


def test_an_empty_catalog_config_map_name_is_checked_not_replaced_by_the_default(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    write(stacks / "lab.yaml", cluster(name="lab", catalogConfigMap={"namespace": "", "name": ""}))
    found = problems(tmp_path, stacks)
    assert [p.split(" (line")[0] for p in found] == [
        "stacks/lab.yaml: catalogConfigMap.name: '' is not a DNS-1123 subdomain (lower-case letters, digits, '-' "
        "and '.', alphanumeric at both ends)",
        "stacks/lab.yaml: catalogConfigMap.namespace: '' is not a DNS-1123 label (lower-case letters, digits and "
        "'-', alphanumeric at both ends)",
    ]


def test_a_bad_label_key_is_shown_at_its_line(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    definition = cluster(name="lab")
    definition["nodePools"][0]["labels"] = {"bad key!": "x"}
    write(stacks / "lab.yaml", definition)
    found = problems(tmp_path, stacks)
    assert len(found) == 1 and found[0].startswith("stacks/lab.yaml: nodePools[0].labels[bad key!]: "), found
    line = next(
        n for n, text in enumerate((stacks / "lab.yaml").read_text().splitlines(), 1) if "bad key!" in text
    )
    assert f"(line {line}, column " in found[0], found
