"""`match`: which devices each offering's DeviceClass selects (offline dry run of the CEL selectors)."""

from __future__ import annotations

import argparse
from pathlib import Path

from themelio_gpu.commands.base import Commands, add_command, add_input_flags, load


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "match",
        "which devices each offering's DeviceClass selects (offline dry run of the CEL selectors)",
        "Its CEL evaluator is checked against the real kube-apiserver and kube-scheduler: `sandbox probe` asks it "
        "about every device the scheduler allocates (docs/sandbox.md).",
        exits="0 every offering's class selects devices of these slices and none overlap, 1 a problem (an empty "
        "class of an offering whose devices are there, an overlap, a selector error), 2 bad input",
    )
    add_input_flags(parser)
    parser.add_argument(
        "--slices", required=True, metavar="FILE", help="kubectl get resourceslices -o json (or -o yaml) output"
    )
    parser.add_argument("--cluster", help="cluster whose classes to use (default: every offering in the catalog)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.dryrun.cluster_match import match_command
    from themelio_gpu.plan.selection import select_cluster

    fleet = load(args)
    plan = select_cluster(fleet, args.cluster) if args.cluster is not None else None
    return match_command(fleet, Path(args.slices), plan, args.json)
