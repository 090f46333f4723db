"""A synthesis kept between runs in a folder of its own (`main.py --keep DIR`), for a pipeline whose every run
starts from a fresh clone (an Atlantis server's pre-workflow hook, docs/pipelines.md).

Before the synthesis, when the output folder does not exist yet, the kept synthesis is copied into it: the
stack files, their assets, the manifest and the record of each stack's inputs (stack_inputs.py). The
synthesis then writes only the stacks whose inputs are not the ones recorded, as it always does: a kept
stack is used only while its record says it was written from exactly these inputs (its cluster's plan, the
tool, the packages, the engine) and its file is still the file written. So the folder needs no key of its
own: whatever it holds, nothing is taken for other inputs. After the synthesis, the output is kept there
in its place (copied beside it, then renamed over it), for the next run.

It only saves time: a kept folder that cannot be read or written is a warning, and the synthesis is whole.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.stack_folders import ASSETS_FOLDER, MANIFEST, STACK_FILE, STACKS_FOLDER
from themelio_gpu.outputs.stack_inputs import INDEX


def synthesis_files(folder: Path) -> list[Path]:
    """What a synthesis wrote in `folder`, relative to it: the record, the manifest, each stack's file and its
    assets (not what Terraform leaves beside them: .terraform/, lock files, plans, state)."""
    files = [Path(name) for name in (INDEX, MANIFEST) if (folder / name).is_file()]
    stacks = folder / STACKS_FOLDER
    for stack in sorted(stacks.iterdir()) if stacks.is_dir() else ():
        if (stack / STACK_FILE).is_file():
            files.append((stack / STACK_FILE).relative_to(folder))
        assets = stack / ASSETS_FOLDER
        files += sorted(p.relative_to(folder) for p in assets.rglob("*") if p.is_file()) if assets.is_dir() else []
    return files


def _copy(source: Path, destination: Path, files: list[Path]) -> None:
    for relative in files:
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / relative, destination / relative)


def restore(keep: Path, target: Path) -> bool:
    """Copy the synthesis kept in `keep` into the output folder `target` when `target` does not exist yet;
    True when it did. Says which, on stderr."""
    if target.exists():
        return False
    if not (keep / INDEX).is_file():
        print(
            f"no synthesis kept in {display_path(keep)}: every stack is synthesized (and kept there)",
            file=sys.stderr,
        )
        return False
    staged: Path | None = None
    try:  # copied beside the output folder, then renamed: never half an output folder
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f".{target.name}.kept-", dir=target.parent))
        _copy(keep, staged, synthesis_files(keep))
        staged.rename(target)
        staged = None
    except OSError as error:
        _warn(f"cannot take the synthesis kept in {display_path(keep)} ({error.strerror or error})")
        return False
    finally:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)
    print(
        f"the synthesis kept in {display_path(keep)} is the start: only the stacks whose inputs changed are "
        "synthesized",
        file=sys.stderr,
    )
    return True


def save(target: Path, keep: Path) -> None:
    """Keep the synthesis in `target` in `keep`, in place of what it held: copied beside it, then renamed."""
    staged: Path | None = None
    old: Path | None = None
    try:
        keep.parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f".{keep.name}.new-", dir=keep.parent))
        _copy(target, staged, synthesis_files(target))
        if keep.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{keep.name}.old-", dir=keep.parent))
            keep.rename(old / "kept")
        staged.rename(keep)
        staged = None
    except OSError as error:  # another run keeping its synthesis at the same moment, say: theirs is kept
        _warn(f"cannot keep the synthesis in {display_path(keep)} ({error.strerror or error})")
    finally:  # whatever stops it, no copy is left behind
        for leftover in (staged, old):
            if leftover is not None:
                shutil.rmtree(leftover, ignore_errors=True)


def _warn(message: str) -> None:
    print(f"warning: {message}; it only saves time: the synthesis is whole", file=sys.stderr)
