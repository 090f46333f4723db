"""`preflight`: read-only checks of a live cluster against its definition."""

from __future__ import annotations

import argparse
import sys

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_command, add_input_flags, load


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "preflight",
        "read-only checks of a live cluster against its definition",
        "The kubeconfig is --kubeconfig, else $KUBECONFIG, else the definition's access.kubeconfig.path.",
        exits="0 every check passed, 1 a check failed or the cluster cannot be reached, 2 bad input or a "
        "kubeconfig that cannot be used (missing, not a kubeconfig, no such context)",
    )
    add_input_flags(parser)
    parser.add_argument("cluster", help="the cluster's name (its definition's `name`)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig to use (overrides $KUBECONFIG)")
    parser.add_argument("--context", help="kubeconfig context to use (default: the definition's context)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.live.kubeconfig import KubeconfigError
    from themelio_gpu.live.preflight import run_preflight
    from themelio_gpu.plan.selection import select_cluster

    plan = select_cluster(load(args), args.cluster)
    try:
        return run_preflight(plan, sys.stdout, kubeconfig=args.kubeconfig, context=args.context)
    except KubeconfigError as error:
        print(f"preflight: {error}", file=sys.stderr)
        return exits.BAD_INPUT
