"""The cluster definition files of a fleet: which files of the stacks folder they are, and what each must be.

Layout (docs/cluster-files.md): `stacks/<cluster>.yaml`, or one folder per environment,
`stacks/<environment>/<cluster>.yaml`; both can be mixed. Every `.yaml` or `.yml` file there (in any case:
`.YAML` too) is a cluster definition, named after its cluster: `name: gpu-east` lives in `gpu-east.yaml`.
The name is the stack's name and its Terraform state key, unique in the whole fleet, so moving a file from
one environment folder to another changes nothing deployed. A YAML file deeper down, or one that is no
cluster definition (a catalog, a schema), is an error naming it; a file of another kind (README.md,
cluster.schema.json) and a hidden file or folder (`.name`) are left alone.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.secrets import find_secrets
from themelio_gpu.inputs.validation import describe_value, validate_model
from themelio_gpu.inputs.yaml_input import YamlDocument, display_path, load_yaml_document
from themelio_gpu.k8s import names as k8s_names

YAML_SUFFIXES = (".yaml", ".yml")

_CLUSTER_KEYS = frozenset(f.alias or name for name, f in ClusterDefinition.model_fields.items()) - {"$schema"}
_REQUIRED_KEYS = [f.alias or name for name, f in ClusterDefinition.model_fields.items() if f.is_required()]


def is_yaml_file_name(path: Path) -> bool:
    return path.suffix.lower() in YAML_SUFFIXES


def _hidden(path: Path) -> bool:
    return path.name.startswith(".")


def cluster_definition_files(stacks_dir: Path, problems: Problems) -> list[Path]:
    """The cluster files of `stacks_dir` (sorted), with a problem for every YAML file too deep to be one."""
    shown = display_path(stacks_dir)
    if not stacks_dir.is_dir():
        problems.add(shown, (), "folder of cluster definitions not found")
        return []
    files: list[Path] = []
    too_deep: list[Path] = []
    for entry in sorted(p for p in stacks_dir.iterdir() if not _hidden(p)):
        if not _is_folder(entry, problems):
            files += _yaml_file(entry, problems)
            continue
        for inner in sorted(p for p in entry.iterdir() if not _hidden(p)):
            if _is_folder(inner, problems):
                too_deep += _yaml_files_below(inner)
            else:
                files += _yaml_file(inner, problems)
    for path in too_deep:
        problems.add(
            display_path(path),
            (),
            f"too deep to be read: cluster files go in {shown}/ or one folder below it "
            f"({shown}/<environment>/<cluster>.yaml); move it up, or out of {shown}/ if it is no cluster",
        )
    if not files and not too_deep:
        problems.add(shown, (), "no cluster definitions (*.yaml) in this folder")
    return files


def _is_folder(path: Path, problems: Problems) -> bool:
    """A folder to read; a link to a folder is refused (it could lead anywhere, or back into stacks/)."""
    if path.is_symlink() and path.is_dir():
        problems.add(
            _shown(path),
            (),
            "a link to a folder is not followed: put the environment's folder itself here, or its files",
        )
        return False
    return path.is_dir()


def _shown(path: Path) -> str:
    """`path` as shown, the link itself rather than where it leads."""
    return f"{display_path(path.parent)}/{path.name}"


def _yaml_file(path: Path, problems: Problems) -> list[Path]:
    """`path` as a cluster file, if it is one by name; a YAML name on something else (a pipe, a device, a
    folder link) is a problem, never read."""
    if not is_yaml_file_name(path) or (path.is_symlink() and path.is_dir()):
        return []
    if not path.is_file():
        problems.add(_shown(path), (), "not a regular file: a cluster file is a plain YAML file")
        return []
    return [path]


def _yaml_files_below(top: Path) -> list[Path]:
    """The YAML files anywhere below `top`, outside hidden folders, links to folders not followed."""
    found: list[Path] = []
    for folder, subfolders, names in os.walk(top):  # followlinks=False
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        found += [Path(folder) / n for n in sorted(names) if is_yaml_file_name(Path(n))]
    return found


def _not_a_cluster(data: Any, stacks: str) -> str | None:
    """Why `data` (a whole YAML file) is no cluster definition, or None when it means to be one."""
    move = f"every YAML file in {stacks}/ is read as a cluster definition: move this one out of {stacks}/"
    if not isinstance(data, Mapping):
        return (
            f"not a cluster definition: the file holds {describe_value(data)}, not a mapping of keys "
            f"({', '.join(_REQUIRED_KEYS)}, ...); {move}"
        )
    keys = [str(k) for k in data]
    if isinstance(data.get("offerings"), Mapping) or ("products" in keys and "name" not in keys):
        return f"this is a GPU catalog, not a cluster definition (the catalog is one file, --catalog); {move}"
    if not _CLUSTER_KEYS & set(keys):
        return (
            f"not a cluster definition: its keys ({', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''}) "
            f"are none of a cluster's ({', '.join(_REQUIRED_KEYS)}, ...); {move}"
        )
    return None


def _check_file_name(path: Path, definition: ClusterDefinition, shown: str, problems: Problems) -> None:
    name = definition.name
    if path.stem == name or k8s_names.dns1123_label(name):  # an invalid name has its own message
        return
    problems.add(
        shown,
        ("name",),
        f"the cluster {name} is defined in {path.name}: a cluster file is named after its cluster (the name is "
        f"its stack and the key of its Terraform state). Rename the file to {name}{path.suffix}; or, if "
        f"{path.stem} is the name you mean, set name: {path.stem} (a new name is a new stack, whose state "
        "starts empty)",
    )


class Documents(Mapping[str, YamlDocument]):
    """The YAML of every file read, by its shown name: where each key stands, for the positions of problems.

    A document is parsed again when a position in it is asked for, not kept: a thousand node trees hold about
    70 MB, and most fleets have no problem to place."""

    def __init__(self) -> None:
        self.paths: dict[str, Path] = {}
        self._parsed: dict[str, YamlDocument | None] = {}

    def __getitem__(self, shown: str) -> YamlDocument:
        if shown not in self._parsed:
            self._parsed[shown] = load_yaml_document(self.paths[shown], Problems(), shown)
        document = self._parsed[shown]
        if document is None:  # it no longer reads: no position in it
            raise KeyError(shown)
        return document

    def __iter__(self) -> Iterator[str]:
        return iter(self.paths)

    def __len__(self) -> int:
        return len(self.paths)


@dataclass
class ClusterFiles:
    """The fleet's cluster definitions as read, before any planning."""

    definitions: list[tuple[str, ClusterDefinition]] = field(default_factory=list)
    """(the file as shown in messages, its definition), in file order."""
    documents: Documents = field(default_factory=Documents)
    """The YAML of every file read, parsed again where a problem needs a position (Documents)."""
    secrets: list[str] = field(default_factory=list)
    """Credentials found in the files: redacted from every message."""
    reused: list[tuple[str, str]] = field(default_factory=list)
    """(file, cluster name) of the files left unread because they are as they were (see load_cluster_files)."""


def load_cluster_files(
    stacks_dir: Path, problems: Problems, unchanged: Mapping[str, str] | None = None
) -> ClusterFiles:
    """Every cluster definition of `stacks_dir`, checked file by file; the problems of all files recorded.

    `unchanged`: file (as shown) -> the SHA-256 of the bytes it had when it was last checked and planned
    with the same catalog and tool (stack_inputs.py). A file that still has those bytes is not read again:
    its name (its file name, which the check made sure of) is all the fleet needs of it.
    """
    found = ClusterFiles()
    stacks = display_path(stacks_dir)
    cwd = Path.cwd().resolve()
    for path in cluster_definition_files(stacks_dir, problems):
        shown = display_path(path, cwd)
        if unchanged and shown in unchanged and _sha256(path) == unchanged[shown]:
            found.reused.append((shown, path.stem))
            continue
        before = len(problems)
        document = load_yaml_document(path, problems, shown)
        if document is None or document.data is None:
            if len(problems) == before:
                problems.add(shown, (), "the file is empty")
            continue
        found.documents.paths[shown] = path
        refused = _not_a_cluster(document.data, stacks)
        if refused is not None:
            problems.add(shown, (), refused)
            continue
        for finding in find_secrets(document.data):
            problems.add(shown, finding.path, finding.message)
            found.secrets += [finding.secret] if finding.secret else []
        definition = validate_model(ClusterDefinition, document.data, shown, problems, document=document)
        if definition is not None:
            _check_file_name(path, definition, shown, problems)
            found.definitions.append((shown, definition))
    seen: dict[str, str] = {name: file for file, name in found.reused}
    for file, definition in found.definitions:
        if definition.name in seen:
            problems.add(
                file, ("name",), f"cluster {definition.name!r} is also defined in {seen[definition.name]}"
            )
        seen.setdefault(definition.name, file)
    return found


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def clusters_beside_the_catalog(catalog: Path, stacks_dir: Path, problems: Problems) -> None:
    """A cluster definition put in the catalog's folder is never read there: an error, not a stack deleted."""
    folder = catalog.parent
    if not folder.is_dir() or folder.resolve() == stacks_dir.resolve():
        return
    for path in sorted(p for p in folder.iterdir() if is_yaml_file_name(p) and p.is_file() and p != catalog):
        data = _quiet_yaml(path)
        if isinstance(data, Mapping) and "nodePools" in data:
            problems.add(
                display_path(path),
                (),
                f"a cluster definition beside the catalog is not read: cluster files go in "
                f"{display_path(stacks_dir)}/ (the catalog's folder holds the catalog alone); move it there",
            )


def _quiet_yaml(path: Path) -> Any:
    """The YAML of a file that is not ours to judge: None, without a problem, when it cannot be read."""
    document = load_yaml_document(path, Problems(), str(path))
    return document.data if document is not None else None
