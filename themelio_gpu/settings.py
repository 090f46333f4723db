"""Where the app reads its input: flags first, then environment variables, then the top-level folders."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CATALOG_ENV = "THEMELIO_CATALOG"
STACKS_DIR_ENV = "THEMELIO_STACKS_DIR"
DEFAULT_CATALOG = Path("catalog/gpu-catalog.yaml")
DEFAULT_STACKS_DIR = Path("stacks")
CHART_CACHE_ENV = "THEMELIO_CHART_CACHE"
DEFAULT_CHART_CACHE = Path(".cache/charts")
"""Where `charts fetch` puts the charts and `verify` renders them from (gitignored)."""
CHART_MIRROR_ENV = "THEMELIO_CHART_MIRROR"
"""When set, the fleet's mirror instead of the catalog's `charts.mirror`, for every command (synthesis included):
how the sandbox points the stacks at its chart repository on loopback (docs/charts.md)."""
SYNTH_COMMAND = ".venv/bin/python main.py"
"""Synthesis without the CDKTF CLI, as the README runs it from the checkout (what advice tells users to run)."""
DEFAULT_OUTDIR = "cdktf.out"
"""Where cdktf writes (and the CDKTF CLI reads) the stacks, unless $CDKTF_OUTDIR says otherwise."""


@dataclass(frozen=True)
class InputPaths:
    catalog: Path
    stacks_dir: Path


DEFAULT_INPUTS = InputPaths(DEFAULT_CATALOG, DEFAULT_STACKS_DIR)


def chart_cache(given: str | None = None) -> Path:
    return Path(given or os.environ.get(CHART_CACHE_ENV) or DEFAULT_CHART_CACHE)


def chart_mirror_override() -> str | None:
    """$THEMELIO_CHART_MIRROR, when set and not empty: the fleet's mirror instead of the catalog's."""
    return os.environ.get(CHART_MIRROR_ENV) or None


def input_paths(catalog: str | None = None, stacks_dir: str | None = None) -> InputPaths:
    return InputPaths(
        catalog=Path(catalog or os.environ.get(CATALOG_ENV) or DEFAULT_CATALOG),
        stacks_dir=Path(stacks_dir or os.environ.get(STACKS_DIR_ENV) or DEFAULT_STACKS_DIR),
    )


def fleet_folders(folders: list[str]) -> tuple[list[InputPaths], list[str]]:
    """Each `--fleet DIR` as its inputs (DIR/catalog/gpu-catalog.yaml and DIR/stacks), and what is wrong with
    any that lacks either (one line each; the caller says how it refuses)."""
    fleets = [InputPaths(Path(f) / DEFAULT_CATALOG, Path(f) / DEFAULT_STACKS_DIR) for f in folders]
    wrong = []
    for folder, paths in zip(folders, fleets, strict=True):
        missing = [] if paths.catalog.is_file() else [str(DEFAULT_CATALOG)]
        missing += [] if paths.stacks_dir.is_dir() else [f"{DEFAULT_STACKS_DIR}/"]
        if missing:
            wrong.append(f"{folder} has no {' and no '.join(missing)}")
    return fleets, wrong
