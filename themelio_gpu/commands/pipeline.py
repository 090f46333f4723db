"""`pipeline github-actions|atlantis`: write a pipeline engine's configuration for the fleet."""

from __future__ import annotations

import argparse
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_command, add_input_flags, paths_of
from themelio_gpu.pipelines import atlantis, github_actions


def register(commands: Commands) -> None:
    engines = add_command(
        commands,
        "pipeline",
        "write a pipeline engine's configuration for the fleet: GitHub Actions or Atlantis",
        exits="each subcommand's --help gives its own",
    ).add_subparsers(dest="engine", required=True, metavar="ENGINE")
    for engine_name, summary in (
        (
            "github-actions",
            "a workflow: synthesize, `changed`, then plan (pull requests) or apply per changed stack",
        ),
        ("atlantis", "atlantis.yaml: one project per stack folder, autoplanned when one of its inputs changes"),
    ):
        parser = add_command(
            engines,
            engine_name,
            summary,
            "Refuses to replace a file it did not write unless --force (docs/pipelines.md).",
            exits="0 written (or up to date), 1 with --check: the file differs from what the fleet needs, 2 bad "
            "input or a file this command did not write (without --force)",
        )
        add_arguments(parser, engine_name)
        parser.set_defaults(run=run)


def add_arguments(parser: argparse.ArgumentParser, engine: str) -> None:
    default = github_actions.DEFAULT_OUTPUT if engine == github_actions.COMMAND else atlantis.DEFAULT_OUTPUT
    add_input_flags(parser)
    parser.add_argument(
        "--output", metavar="FILE", default=default, help=f"where to write it (default: {default})"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace the file even if this command did not write it"
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when the file is missing or out of date"
    )
    parser.add_argument(
        "--terraform",
        choices=sorted(github_actions.DISTRIBUTIONS),
        default="terraform",
        help="run Terraform or OpenTofu (default: terraform)",
    )
    parser.add_argument(
        "--skip-local-state",
        action="store_true",
        help="leave the clusters whose backend is local out of the pipeline (deploy them by hand) instead of "
        "refusing them: a pipeline job throws their state away",
    )
    if engine == github_actions.COMMAND:
        parser.add_argument(
            "--branch", default="main", help="the branch whose pushes apply the stacks (default: main)"
        )


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.pipelines.write import write_pipeline

    current = write_pipeline(
        paths_of(args),
        args.engine,
        Path(args.output),
        force=args.force,
        check=args.check,
        terraform=args.terraform,
        skip_local_state=args.skip_local_state,
        branch=getattr(args, "branch", "main"),
    )
    return exits.OK if current else exits.FAILED
