"""The stack folders of a synthesized output (`<outdir>/stacks/<cluster>/`): which files synthesis owns,
which belong to Terraform, and which folders are left over from clusters that no longer exist.

`python main.py` removes a left-over folder it recognises (its `cdk.tf.json` names that stack) when it holds
nothing but what synthesis and `terraform init`/`cdktf diff` re-create; a folder that holds Terraform state
or anything else is kept, with a message, because deleting it could lose state. `check` ignores Terraform's
working files, so a stack that was planned or deployed from its folder is not drift.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

STACKS_FOLDER = "stacks"
STACK_FILE = "cdk.tf.json"
MANIFEST = "manifest.json"
ASSETS_FOLDER = "assets"
"""Beside a stack file, the files cdktf copies into the stack (`TerraformAsset`: the charts from local chart
folders, constructs/release_settings.py): synthesis owns the whole folder."""

# What Terraform and `cdktf diff/deploy` write beside cdk.tf.json, and can write again.
_RECREATABLE = {".terraform", ".terraform.lock.hcl", "plan"}
_STATE_SUFFIXES = (".tfstate", ".tfstate.backup")
_STATE_FILES = {".terraform.tfstate.lock.info"}


def is_terraform_working_file(relative: str) -> bool:
    """A path (relative to the output folder) that Terraform writes in a stack folder, not synthesis."""
    parts = PurePosixPath(relative).parts
    if len(parts) < 3 or parts[0] != STACKS_FOLDER:
        return False
    inner = parts[2:]
    return inner[0] in _RECREATABLE or _is_state(inner[-1])


def _is_state(name: str) -> bool:
    return name.endswith(_STATE_SUFFIXES) or name in _STATE_FILES


def is_synthesis_output(relative: str) -> bool:
    """A path (relative to the output folder) that synthesis owns: the manifest and the stack folders."""
    parts = PurePosixPath(relative).parts
    return (parts == (MANIFEST,) or (len(parts) >= 3 and parts[0] == STACKS_FOLDER)) and not (
        is_terraform_working_file(relative)
    )


@dataclass(frozen=True)
class StaleStack:
    name: str
    folder: Path
    kept: tuple[str, ...]
    """Files that make the folder unsafe to delete (Terraform state, files synthesis did not write)."""

    @property
    def removable(self) -> bool:
        return not self.kept


def _stack_name(folder: Path) -> str | None:
    """The stack name a folder's cdk.tf.json records, or None when it is not a cdktf stack folder."""
    try:
        data = json.loads((folder / STACK_FILE).read_text(encoding="utf-8"))
        name = data["//"]["metadata"]["stackName"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None


def synthesized_stacks(outdir: Path) -> dict[str, Path]:
    """Stack name -> stack file of every stack of a synthesized output folder (`<outdir>/stacks/<name>/cdk.tf.json`),
    sorted by name; none when there is no stacks/ folder. The one place that finds the stacks of a folder."""
    stacks = outdir / STACKS_FOLDER
    if not stacks.is_dir():
        return {}
    return {path.parent.name: path for path in sorted(stacks.glob(f"*/{STACK_FILE}"))}


def stale_stacks(outdir: Path, current: set[str]) -> list[StaleStack]:
    """Stack folders under `outdir` that cdktf wrote for a cluster not in `current`."""
    found = []
    for name, file in synthesized_stacks(outdir).items():
        folder = file.parent
        if folder.is_symlink() or name in current or _stack_name(folder) != name:
            continue
        kept = []
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if rel.parts[0] in _RECREATABLE:  # .terraform/ holds providers and backend settings, no state
                continue
            ours = rel.as_posix() == STACK_FILE or rel.parts[0] == ASSETS_FOLDER
            if path.is_file() and (not ours or path.is_symlink()):
                kept.append(rel.as_posix())
        found.append(StaleStack(folder.name, folder, tuple(kept)))
    return found


def held_files(stack: StaleStack) -> str:
    """What makes a stale folder unsafe to delete, for a message."""
    state = [f for f in stack.kept if _is_state(PurePosixPath(f).name)]
    if state:
        return f"Terraform state ({', '.join(state)})"
    return f"files synthesis did not write ({', '.join(stack.kept)})"


def kept_message(stack: StaleStack, shown: str) -> str:
    return (
        f"{shown}: cluster {stack.name} is no longer defined, but its folder holds {held_files(stack)}; it was "
        "kept. Destroy the stack or move its state first (with the cluster file restored), then delete the folder"
    )


def remove_stale_stacks(
    outdir: Path, current: set[str], delete: bool = True
) -> tuple[list[str], list[StaleStack]]:
    """Deletes the removable stale stack folders (`delete=False`: only names them, for a caller that deletes
    them itself); returns their names and the stale folders that were kept."""
    removed, kept = [], []
    for stack in stale_stacks(outdir, current):
        if stack.removable:
            if delete:
                shutil.rmtree(stack.folder)
            removed.append(stack.name)
        else:
            kept.append(stack)
    return removed, kept
