"""Where a chart comes from: a chart repository's address, or a folder of the project holding packaged charts.

A chart source is what a cluster file's `gpuOperator.repository` / `draDriver.repository` or the catalog's
`charts.mirror` names (and `$THEMELIO_CHART_MIRROR`, settings.py). Two kinds (docs/charts.md):

- an address, `https://`, `http://` (a Helm repository) or `oci://` (an OCI registry), without credentials:
  the helm provider pulls the chart from it at deploy time (`helm_release.repository`);
- anything else is a local chart folder, a path relative to the project root: the folder holding the
  catalog's folder (`catalog/gpu-catalog.yaml` -> the checkout, where cdktf.json is). It holds each chart
  packaged as `helm pull` (without `--untar`) and `helm package` write it, `<chart>-<version>.tgz`. Synthesis
  copies the archive a release needs into the stack's folder (a cdktf asset, `assets/...`), so the stack
  installs it from there: the output holds no path of this machine, and the stack folder is all a pipeline
  needs. A path that is absolute, or leaves the project, is refused: the output would depend on where the
  project is.

The folder's checks that need the file system (it exists, stays in the project through links, holds the
archive, the archive is that chart) are `local_chart` and `folder_problem`; the rest is `chart_source_problem`,
which the models' validators run.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import posixpath
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

REPOSITORY_SCHEMES = ("https", "http", "oci")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_ADDRESS = re.compile(r"^(https?|oci)://[^\s@]+$")
_ABSOLUTE = re.compile(r"^(/|~|[A-Za-z]:[\\/]|\\\\)")
ARCHIVE_SUFFIX = ".tgz"
MAX_CHART_YAML_BYTES = 1024 * 1024
NOT_AN_INPUT: dict[str, Any] = {"input": False}
"""Metadata of a plan field that says where something is on this machine, not what a stack is made of: the
digest of a stack's inputs (outputs/stack_inputs.py) leaves such a field out."""


def is_local_folder(source: str) -> bool:
    """A chart source that is no address (`scheme://...`): a folder of the project."""
    return _SCHEME.match(source) is None


def archive_name(chart: str, version: str) -> str:
    """The file a local chart folder holds for a chart version: `<chart>-<version>.tgz`, as `helm pull` and
    `helm package` name it."""
    return f"{chart}-{version}{ARCHIVE_SUFFIX}"


def chart_source_problem(source: str, *, secrets_checked: bool = True) -> str | None:
    """What is wrong with a chart source as written, or None: an address of another scheme or with
    credentials, an empty, absolute or backslashed folder, a folder that leaves the project.

    `secrets_checked`: the text was searched for credentials already (inputs/secrets.py refuses an address
    with a password in a file, with its own message): only a user name alone is refused here then."""
    scheme = _SCHEME.match(source)
    if scheme is not None:
        if scheme.group(1).lower() not in REPOSITORY_SCHEMES:
            return (
                f"{scheme.group(1)}:// is not a chart repository address: write an https://, http:// or oci:// "
                "address, or a folder of the project (relative to the project root) holding "
                "<chart>-<version>.tgz archives"
            )
        userinfo = source[scheme.end() :].split("/")[0].rpartition("@")[0]
        if "@" in source and not (secrets_checked and ":" in userinfo):
            return (
                "must not embed credentials (a user name or password): give the helm provider its repository "
                "login the way your pipeline gives secrets; no secret may reach the synthesized output"
            )
        if "@" in source:
            return None  # a password: inputs/secrets.py says so
        if _ADDRESS.match(source) is None:
            return f"{source!r} is not a repository address (https://, http:// or oci://, no spaces)"
        return None
    if not source.strip():
        return "is empty: name a repository address or a folder of the project"
    if _ABSOLUTE.match(source):
        return (
            "is an absolute path: name the chart folder relative to the project root (the folder holding the "
            "catalog's folder), so that the stacks do not depend on where the project is"
        )
    if "\\" in source:
        return "use / between folders (the path is relative to the project root, the same on every machine)"
    if posixpath.normpath(source).split("/")[0] == "..":
        return (
            "leaves the project: a chart folder is inside the project root (the folder holding the catalog's "
            "folder), so that a checkout holds every chart its stacks install"
        )
    return None


def checked_chart_source(value: str | None) -> str | None:
    """A model validator's body: `value` when it is a chart source (chart_source_problem), else ValueError."""
    problem = chart_source_problem(value) if value is not None else None
    if problem is not None:
        raise ValueError(problem)
    return value


def project_root(catalog: Path) -> Path:
    """The project root a chart folder is relative to: the folder holding the catalog's folder (absolute)."""
    return catalog.absolute().parent.parent


@dataclass(frozen=True)
class LocalChart:
    """A release's chart as a file of the project: what synthesis copies into the stack (a cdktf asset)."""

    archive: str
    """The archive, relative to the project root (`charts/gpu-operator-v26.3.3.tgz`)."""
    sha256: str
    """The SHA-256 of its bytes: in the stack's input digest, and the asset's folder in the stack."""
    source: Path = field(metadata=NOT_AN_INPUT)
    """Where this machine has it (absolute): the file synthesis copies; not part of what a stack is made of."""


class ChartFolderError(Exception):
    """A local chart folder that cannot give a release its chart; `about_folder`: the folder itself is wrong
    (else: the archive the release needs)."""

    def __init__(self, message: str, *, about_folder: bool) -> None:
        super().__init__(message)
        self.about_folder = about_folder


def folder_problem(root: Path, folder: str) -> str | None:
    """What is wrong with a local chart folder (syntax aside, chart_source_problem): it does not exist, is no
    folder, or leads out of the project through a link."""
    path = root / folder
    if not path.is_dir():
        what = "is not a folder" if path.exists() else "no such folder"
        return f"{what}: {folder} (relative to the project root, the folder holding the catalog's folder)"
    if not path.resolve().is_relative_to(root.resolve()):
        return f"{folder} leads out of the project (a link): a chart folder is inside the project root"
    return None


def local_chart(root: Path, folder: str, chart: str, version: str) -> LocalChart:
    """The archive of `chart` `version` in the local chart folder `folder`; ChartFolderError says what is
    missing (naming what the folder holds) or wrong."""
    problem = folder_problem(root, folder)
    if problem is not None:
        raise ChartFolderError(problem, about_folder=True)
    name = archive_name(chart, version)
    relative = PurePosixPath(posixpath.normpath(folder)) / name
    path = root / folder / name
    if not path.is_file():
        raise ChartFolderError(_missing(root / folder, folder, name, path), about_folder=False)
    if not path.resolve().is_relative_to(root.resolve()):
        raise ChartFolderError(f"{relative} leads out of the project (a link)", about_folder=False)
    data = path.read_bytes()
    wrong = archive_problem(data, chart, version)
    if wrong is not None:
        raise ChartFolderError(f"{relative}: {wrong}", about_folder=False)
    return LocalChart(str(relative), hashlib.sha256(data).hexdigest(), path.resolve())


def _missing(folder_path: Path, folder: str, name: str, path: Path) -> str:
    if path.is_dir():
        return (
            f"{folder}/{name} is a folder: a chart folder holds packaged charts (`helm package {folder}/{name}` "
            "writes the archive)"
        )
    held = sorted(p.name for p in folder_path.iterdir() if not p.name.startswith("."))
    archives = [n for n in held if n.endswith(ARCHIVE_SUFFIX)]
    if archives:
        holds = f"it holds {', '.join(archives)}"
    elif held:
        holds = f"it holds no {ARCHIVE_SUFFIX} archive ({', '.join(held[:5])}{', ...' if len(held) > 5 else ''})"
    else:
        holds = "it is empty"
    return (
        f"{folder} has no {name}; {holds}. Put the packaged chart there: `helm pull <chart> --version <version>` "
        f"(without --untar) or `helm package` of the chart folder writes {name}"
    )


def archive_problem(data: bytes, chart: str, version: str) -> str | None:
    """What is wrong with a chart archive's bytes for `chart` `version`: not a gzipped tar, no
    `<folder>/Chart.yaml` at its top, or a Chart.yaml naming another chart or version."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            members = [m for m in archive.getmembers() if _is_top_chart_yaml(m.name)]
            if not members:
                return "not a packaged chart: no <chart>/Chart.yaml at the top of the archive"
            member = members[0]
            if not member.isfile() or member.size > MAX_CHART_YAML_BYTES:
                return "not a packaged chart: its Chart.yaml is no readable file"
            extracted = archive.extractfile(member)
            text = extracted.read().decode("utf-8") if extracted is not None else ""
    except (tarfile.TarError, gzip.BadGzipFile, EOFError, OSError, UnicodeDecodeError) as error:
        return f"not a packaged chart (a gzipped tar archive, as `helm package` writes): {error}"
    try:
        meta = yaml.safe_load(text)
    except yaml.YAMLError as error:
        return f"its Chart.yaml is not YAML: {error}"
    return chart_identity_problem(meta, chart, version)


def _is_top_chart_yaml(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return len(parts) == 2 and parts[1] == "Chart.yaml"


def chart_identity_problem(meta: Any, chart: str, version: str) -> str | None:
    """None when a chart's Chart.yaml (`meta`, as loaded) names `chart` at `version`; else what it is."""
    if isinstance(meta, dict) and (str(meta.get("name")), str(meta.get("version"))) == (chart, version):
        return None
    found = f"{meta.get('name')} {meta.get('version')}" if isinstance(meta, dict) else "no chart"
    return f"is {found}, not {chart} {version}"
