"""`trial`: two or more offerings side by side on ResourceSlices: which devices each could be given."""

from __future__ import annotations

import argparse
from pathlib import Path

from themelio_gpu.commands.base import BAD_INPUT, Commands, add_catalog_flag, add_command, load_catalog_only


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "trial",
        "two or more offerings side by side on ResourceSlices: which devices each could be given",
        "Reads the catalog alone (no cluster definition); exit 1 when the trial finds a problem.",
        exits=f"0 every device each offering selects meets its definition, 1 one does not or an offering selects "
        f"nothing, {BAD_INPUT}",
    )
    add_catalog_flag(parser)
    parser.add_argument(
        "--slices", required=True, metavar="FILE", help="kubectl get resourceslices -o yaml (or -o json) output"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "offerings", nargs="+", metavar="OFFERING", help="extended resource names, e.g. nvidia.com/h100"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.dryrun.trial import trial_command

    return trial_command(load_catalog_only(args), Path(args.slices), args.offerings, args.json)
