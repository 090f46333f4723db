"""What the commands share: their parsers' shape (summary, description, exit codes last), the input flags,
--version, and reading the inputs they name."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TypeAlias

from themelio_gpu import __version__, engine
from themelio_gpu.inputs.catalog.catalog import Catalog
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import Fleet
from themelio_gpu.settings import CATALOG_ENV, DEFAULT_INPUTS, STACKS_DIR_ENV, InputPaths, input_paths

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

BAD_INPUT = "2 bad input (every problem is listed)"
"""How most commands' --help words exit code 2."""


def add_command(
    commands: Commands, name: str, summary: str, details: str = "", *, exits: str
) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does (`summary` also shows in the parent's command list) and,
    last, its own exit codes."""
    return commands.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}. {details}".strip(),
        epilog=exits if exits.startswith("exit codes") else f"exit codes: {exits}",
    )


def add_group(commands: Commands, name: str, summary: str) -> Commands:
    """A command of subcommands (`catalog validate`, `charts fetch`): each has its own exit codes."""
    group = add_command(commands, name, summary, exits="each subcommand's --help gives its own")
    return group.add_subparsers(dest=f"{name}_command", required=True, metavar="SUBCOMMAND")


def add_catalog_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--catalog", metavar="FILE", help=f"the GPU catalog (default: ${CATALOG_ENV} or catalog/gpu-catalog.yaml)"
    )


def add_input_flags(parser: argparse.ArgumentParser) -> None:
    add_catalog_flag(parser)
    parser.add_argument(
        "--stacks-dir",
        metavar="DIR",
        help=f"folder of cluster definitions, one *.yaml per cluster (default: ${STACKS_DIR_ENV} or stacks/)",
    )


class _VersionAction(argparse.Action):
    """--version: the text as it is (argparse's own action rewraps it), read only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(version_text())
        parser.exit()


def add_version_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version",
        action=_VersionAction,
        nargs=0,
        help="print the version, the engine and its bindings, and exit",
    )


def version_text() -> str:
    """This tool's version, the engine THEMELIO_ENGINE selects and its bindings, as installed."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(distribution: str, pinned: str) -> str:
        try:
            found = version(distribution)
        except PackageNotFoundError:
            return f"{distribution} not installed (pinned: {pinned})"
        return f"{distribution} {found}" + ("" if found == pinned else f" (pinned: {pinned})")

    try:
        chosen = engine.selected()
    except engine.EngineSettingError as error:
        return f"themelio-gpu {__version__}; {error}"
    parts = [installed(chosen.distribution, chosen.version)]
    for bindings in (chosen.kubernetes, chosen.helm):
        _, source, provider = bindings.provider
        parts.append(f"{installed(bindings.distribution, bindings.version)} ({source} {provider})")
    return f"themelio-gpu {__version__}, engine {chosen.name} (${engine.ENV}): " + ", ".join(parts)


def not_here(args: argparse.Namespace) -> None:
    """Run from a folder without the default inputs (not the checkout): one message saying where to run, instead
    of a missing catalog and a missing stacks folder."""
    named = getattr(args, "catalog", None) or getattr(args, "stacks_dir", None)
    paths = input_paths(None, None)
    if named or paths != DEFAULT_INPUTS or paths.catalog.exists() or paths.stacks_dir.exists():
        return
    problems = Problems()
    problems.add(
        f"{paths.catalog}, {paths.stacks_dir}/",
        "",
        f"neither is in {Path.cwd()}: run the command from the folder that holds your catalog/ and stacks/ "
        f"(the checkout), or name them with --catalog and --stacks-dir (or ${CATALOG_ENV}, ${STACKS_DIR_ENV})",
    )
    problems.raise_if_any()


def paths_of(args: argparse.Namespace) -> InputPaths:
    """The catalog and stacks folder the command line names (or their defaults)."""
    return input_paths(args.catalog, args.stacks_dir)


def load(args: argparse.Namespace) -> Fleet:
    """The fleet of the named inputs; its warnings go to stderr."""
    not_here(args)
    paths = paths_of(args)
    fleet = load_fleet(paths.catalog, paths.stacks_dir)
    for warning in fleet.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return fleet


def load_catalog_only(args: argparse.Namespace) -> Catalog:
    """The named catalog alone (no cluster definition read)."""
    not_here(args)
    path = input_paths(args.catalog, None).catalog
    problems = Problems()
    catalog = load_catalog(path, problems, display_path(path))
    problems.raise_if_any()
    assert catalog is not None
    return catalog
