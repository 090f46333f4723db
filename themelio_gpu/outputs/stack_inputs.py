"""What a stack is made from, as one digest: its cluster's plan, this tool's code, every installed package and
the engine. A stack whose digest is the one recorded when its files were written is not synthesized again.

The plan (plan/fleet.py) holds everything a stack is built from: the constructs read nothing else, so a
catalog change reaches exactly the clusters whose plans it changes (an offering's text, say, the clusters
serving it). The rest covers what the plan does not: a change to this tool or to any package (a new lock, a
patched binding) changes every stack's digest.

The digests of the stacks in an output folder are kept beside its manifest, in `.themelio-inputs.json`, with
each stack file's own SHA-256: a stack file edited by hand, or deleted, is written again.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from themelio_gpu.engine import Engine
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.settings import CHART_MIRROR_ENV, chart_mirror_override

INDEX = ".themelio-inputs.json"
"""Beside manifest.json: per stack, the digest of its inputs and the SHA-256 of its stack file."""
INDEX_FORMAT = 1
PACKAGE = Path(__file__).resolve().parents[1]
_CODE_SUFFIXES = (".py", ".js", ".json")


def canonical(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """`value` as plain JSON data, the same for equal values in any process: dataclasses and pydantic models
    by field (less a dataclass's fields marked `NOT_AN_INPUT`), mappings by sorted key, sets sorted. Anything
    else is a TypeError (a plan that holds something this cannot see would make digests lie).

    `memo` (id -> result) keeps the result of each dataclass, model and mapping met: the catalog's
    offerings and products, which every plan shares, are turned once per fleet, not once per cluster."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return canonical(value.value, memo)
    if isinstance(value, list | tuple):
        return [canonical(item, memo) for item in value]
    key = id(value)
    if memo is not None and key in memo:
        return memo[key][1]
    if isinstance(value, BaseModel):
        result: Any = {name: canonical(getattr(value, name), memo) for name in type(value).model_fields}
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        # A field that says where a file is on this machine is no input (inputs/chart_sources.NOT_AN_INPUT).
        result = {
            field.name: canonical(getattr(value, field.name), memo)
            for field in dataclasses.fields(value)
            if field.metadata.get("input", True)
        }
    elif isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda item: repr(item[0]))
        result = [[canonical(k, memo), canonical(v, memo)] for k, v in items]
    elif isinstance(value, set | frozenset):
        result = sorted((canonical(item, memo) for item in value), key=repr)
    else:
        raise TypeError(f"stack_inputs.canonical: no canonical form for {type(value).__qualname__}")
    if memo is not None:
        memo[key] = (value, result)  # the value too: its id stays its own while the memo lives
    return result


@cache
def code_digest() -> str:
    """SHA-256 of this tool's code and data (themelio_gpu/: Python, the node preload, the Helm tables)."""
    return code_digest_of(PACKAGE)


def code_digest_of(package: Path) -> str:
    """code_digest() of the package in `package` (another checkout's themelio_gpu/, for `changed`)."""
    digest = hashlib.sha256()
    for path in sorted(
        p
        for p in package.rglob("*")
        if p.suffix in _CODE_SUFFIXES and "__pycache__" not in p.relative_to(package).parts and p.is_file()
    ):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@cache
def packages_digest() -> str:
    """SHA-256 of every installed package's name and version (the lock, as installed)."""
    found = sorted({f"{d.metadata['Name']}=={d.version}".lower() for d in distributions() if d.metadata["Name"]})
    return hashlib.sha256("\n".join(found).encode()).hexdigest()


def fleet_key(catalog: Path, engine: Engine) -> str:
    """What every cluster's plan depends on beside its own file: the catalog's bytes, $THEMELIO_CHART_MIRROR,
    this tool, the packages and the engine. While it is the one recorded, an unchanged cluster file has an
    unchanged plan, unless the plan ships a chart from a local chart folder (Index.unchanged_files)."""
    try:
        catalog_bytes = catalog.read_bytes()
    except OSError:
        catalog_bytes = b""  # load_fleet reports it; nothing is reused meanwhile
    mirror = f"\0{CHART_MIRROR_ENV}={override}" if (override := chart_mirror_override()) is not None else ""
    text = _tool_inputs(engine) + hashlib.sha256(catalog_bytes).hexdigest() + mirror
    return hashlib.sha256(text.encode()).hexdigest()


def _tool_inputs(engine: Engine) -> str:
    """What every stack is made from beside its plan: the record's format, the engine, this tool, the packages."""
    return f"{INDEX_FORMAT}\0{engine.name}\0{code_digest()}\0{packages_digest()}\0"


def input_digests(fleet: Fleet, engine: Engine) -> dict[str, str]:
    """Per planned cluster, the digest of everything its stack is made from."""
    return plan_digests(fleet.clusters, engine)


def plan_digests(
    plans: Iterable[ClusterPlan], engine: Engine, memo: dict[int, Any] | None = None
) -> dict[str, str]:
    """input_digests of some plans; `memo` (canonical's) may be kept for more plans of the same fleet."""
    shared = _tool_inputs(engine)
    memo = {} if memo is None else memo
    return {plan.name: _digest(shared, plan, memo) for plan in plans}


def _digest(shared: str, plan: ClusterPlan, memo: dict[int, Any]) -> str:
    # The file's path is where the plan came from, not what the stack is made of.
    data = canonical(dataclasses.replace(plan, file=""), memo)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((shared + text).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What was recorded of one stack when its files were written."""

    file: str
    """Its cluster file, as shown, and the SHA-256 of the bytes it had."""
    file_sha: str
    inputs: str
    """The digest of its inputs (input_digests)."""
    stack_file: str
    """SHA-256 of its cdk.tf.json as written."""
    summary: tuple[str, ...]
    """Its row of the summary table (synth.summary_row)."""
    warnings: tuple[str, ...]
    """The warnings its cluster file gave (a Kubernetes version newer than any known, ...)."""
    charts: tuple[str, ...] = ()
    """The archives it ships from local chart folders (relative to the project root)."""


@dataclasses.dataclass(frozen=True)
class Index:
    fleet_key: str
    stacks: Mapping[str, Recorded]

    def unchanged_files(self, key: str) -> dict[str, str]:
        """The cluster files that need not be read again while `key` is the recorded one: file -> SHA-256.
        Not those of stacks that ship a chart from a local chart folder: their plans depend on the archive's
        bytes too, so they are planned again (and written only if the archive changed)."""
        if key != self.fleet_key:
            return {}
        return {r.file: r.file_sha for r in self.stacks.values() if not r.charts}


EMPTY = Index("", {})


def read_index(target: Path) -> Index:
    """The record kept in `target`; empty when there is none or it is not ours (then every stack is written)."""
    try:
        data = json.loads((target / INDEX).read_text(encoding="utf-8"))
        if data.get("format") != INDEX_FORMAT:
            return EMPTY
        stacks = {
            name: Recorded(
                str(e["file"]),
                str(e["fileSha256"]),
                str(e["inputs"]),
                str(e["stackFileSha256"]),
                tuple(str(c) for c in e["summary"]),
                tuple(str(w) for w in e["warnings"]),
                tuple(str(c) for c in e.get("charts", ())),
            )
            for name, e in data["stacks"].items()
        }
        return Index(str(data["fleetKey"]), stacks)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return EMPTY


def index_text(index: Index) -> str:
    stacks = {
        name: {
            "file": r.file,
            "fileSha256": r.file_sha,
            "inputs": r.inputs,
            "stackFileSha256": r.stack_file,
            "summary": list(r.summary),
            "warnings": list(r.warnings),
            **({"charts": list(r.charts)} if r.charts else {}),
        }
        for name, r in sorted(index.stacks.items())
    }
    data = {"format": INDEX_FORMAT, "fleetKey": index.fleet_key, "stacks": stacks}
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
