"""`compare-engines`: what moving from cdktf to CDK Terrain changes in a fleet's stacks, and that it is nothing
but the expected.

The fleet is synthesized once per engine (each in its own process: one process loads one engine), and the
two outputs are compared as JSON after the differences below are removed from both. What is left is
unexpected: it is printed, and the exit status is 1. CI runs it on every example and fixture fleet.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themelio_gpu import exits, interrupts
from themelio_gpu.engine import ENGINES, ENV
from themelio_gpu.outputs.stack_folders import MANIFEST, STACK_FILE, STACKS_FOLDER, synthesized_stacks
from themelio_gpu.words import count

PROJECT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ExpectedDifference:
    what: str
    """What differs, for the report."""
    applies: Callable[[Any], None]
    """Removes the difference from a stack's (or the manifest's) JSON, in place: the same for both engines."""


def _pop(data: Any, *path: str) -> None:
    for key in path[:-1]:
        data = data.get(key, {}) if isinstance(data, dict) else {}
    if isinstance(data, dict):
        data.pop(path[-1], None)


def _namespace_metadata_as_a_block(stack: Any) -> None:
    for body in stack.get("resource", {}).get("kubernetes_namespace_v1", {}).values():
        metadata = body.get("metadata")
        if isinstance(metadata, list) and len(metadata) == 1:
            body["metadata"] = metadata[0]


# Every difference CDK Terrain 0.24 with its 3.x providers makes, and nothing else. Reviewed like code: a new
# entry here is a change users see in their plans, and goes into docs/cdk-terrain.md.
STACK_DIFFERENCES = (
    # The engine writes its own version into every stack's metadata (cdktf 0.21.0, cdktn 0.24.0).
    ExpectedDifference(
        "the engine's version in `//.metadata.version`", lambda s: _pop(s, "//", "metadata", "version")
    ),
    # The providers each engine's bindings wrap: hashicorp/kubernetes 2.38.0 or 3.4.0, hashicorp/helm 3.1.1 or
    # 3.3.0. `terraform init -upgrade` installs the new ones; no way back once a 3.x provider wrote the state.
    ExpectedDifference(
        "the kubernetes provider's version (2.38.0 -> 3.4.0)",
        lambda s: _pop(s, "terraform", "required_providers", "kubernetes", "version"),
    ),
    ExpectedDifference(
        "the helm provider's version (3.1.1 -> 3.3.0)",
        lambda s: _pop(s, "terraform", "required_providers", "helm", "version"),
    ),
    # kubernetes 3.x (plugin framework) takes kubernetes_namespace_v1's `metadata` as a list of one block; the
    # provider upgrades the state of an existing namespace itself (same address, same object).
    ExpectedDifference(
        "kubernetes_namespace_v1's `metadata`: a list of one block", _namespace_metadata_as_a_block
    ),
)
MANIFEST_DIFFERENCES = (
    # manifest.json records the engine's version; how it is indented (cdktn writes `[]` and `{}`) is not
    # compared, since the files are compared as JSON.
    ExpectedDifference("the engine's version in manifest.json", lambda m: _pop(m, "version")),
)


@dataclass(frozen=True)
class EngineComparison:
    stacks: tuple[str, ...]
    unexpected: tuple[str, ...]
    """One line per difference that is not expected: `<file>: <JSON path>: <cdktf> != <cdktn>`."""


def _normalized(path: Path, differences: tuple[ExpectedDifference, ...]) -> Any:
    data = json.loads(path.read_text(encoding="utf-8"))
    for difference in differences:
        difference.applies(data)
    return data


def _differences(left: Any, right: Any, where: str) -> Iterator[str]:
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right)):
            if key not in right:
                yield f"{where}.{key}: only with cdktf"
            elif key not in left:
                yield f"{where}.{key}: only with cdktn"
            else:
                yield from _differences(left[key], right[key], f"{where}.{key}")
    elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            yield from _differences(a, b, f"{where}[{index}]")
    elif left != right:
        yield f"{where}: {json.dumps(left)[:200]} (cdktf) != {json.dumps(right)[:200]} (cdktn)"


def compare_outputs(cdktf: Path, cdktn: Path) -> EngineComparison:
    """The differences between two synthesized folders that are not in the expected lists above."""
    unexpected: list[str] = []
    names = sorted({name for out in (cdktf, cdktn) for name in synthesized_stacks(out)})
    files = [(MANIFEST, MANIFEST_DIFFERENCES)] + [
        (f"{STACKS_FOLDER}/{name}/{STACK_FILE}", STACK_DIFFERENCES) for name in names
    ]
    for relative, differences in files:
        left, right = cdktf / relative, cdktn / relative
        if not left.is_file() or not right.is_file():
            unexpected.append(f"{relative}: written by {'cdktn' if right.is_file() else 'cdktf'} only")
            continue
        found = _differences(_normalized(left, differences), _normalized(right, differences), "")
        unexpected += [f"{relative}: {line.lstrip('.')}" for line in found]
    for name in names:  # the stacks' other files (the assets: charts from local chart folders), byte for byte
        folders = (cdktf / STACKS_FOLDER / name, cdktn / STACKS_FOLDER / name)
        left_files, right_files = (_other_files(folder) for folder in folders)
        for relative in sorted(left_files.keys() | right_files.keys()):
            shown = f"{STACKS_FOLDER}/{name}/{relative}"
            if relative not in left_files or relative not in right_files:
                unexpected.append(f"{shown}: written by {'cdktn' if relative in right_files else 'cdktf'} only")
            elif left_files[relative].read_bytes() != right_files[relative].read_bytes():
                unexpected.append(f"{shown}: the engines wrote other bytes")
    return EngineComparison(tuple(names), tuple(unexpected))


def _other_files(stack: Path) -> dict[str, Path]:
    """A synthesized stack folder's files beside its stack file, by path relative to the folder."""
    if not stack.is_dir():
        return {}
    files = (p for p in sorted(stack.rglob("*")) if p.is_file())
    return {p.relative_to(stack).as_posix(): p for p in files if p.relative_to(stack).as_posix() != STACK_FILE}


def synthesize_with(engine: str, catalog: Path, stacks_dir: Path, out: Path) -> None:
    """The fleet synthesized by `engine`, in a process of its own (`main.py`, as the CDKTF CLI runs it)."""
    command = [
        sys.executable,
        str(PROJECT / "main.py"),
        "--catalog",
        str(catalog),
        "--stacks-dir",
        str(stacks_dir),
    ]
    env = {**os.environ, ENV: engine}
    done = interrupts.run([*command, "--outdir", str(out), "--quiet"], env=env)
    if done.returncode != 0:
        raise EngineSynthesisError(
            f"synthesis with {engine} failed (exit {done.returncode}):\n{done.stderr.strip()}"
        )


class EngineSynthesisError(RuntimeError):
    """One engine could not synthesize the fleet (its own message follows)."""


def compare_engines(catalog: Path, stacks_dir: Path, report: Any = sys.stdout) -> int:
    with tempfile.TemporaryDirectory(prefix="themelio-engines-") as tmp:
        outputs = {name: Path(tmp) / name for name in ENGINES}
        for name, out in outputs.items():
            synthesize_with(name, catalog, stacks_dir, out)
        result = compare_outputs(outputs["cdktf"], outputs["cdktn"])
    print(f"{count(len(result.stacks), 'stack')} synthesized by {ENGINES['cdktf'].describe()}", file=report)
    print(f"and by {ENGINES['cdktn'].describe()}", file=report)
    print("expected differences (docs/cdk-terrain.md):", file=report)
    for difference in (*STACK_DIFFERENCES, *MANIFEST_DIFFERENCES):
        print(f"  - {difference.what}", file=report)
    if not result.unexpected:
        print("no other difference", file=report)
        return exits.OK
    print(f"{len(result.unexpected)} unexpected difference(s):", file=report)
    for line in result.unexpected:
        print(f"  {line}", file=report)
    return exits.FAILED
