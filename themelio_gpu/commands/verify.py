"""`verify`: render the real charts with the stack's values and prove every operand's placement."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_command, add_input_flags, load
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.settings import CHART_CACHE_ENV, DEFAULT_CHART_CACHE, chart_cache


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "verify",
        "render the real charts with the stack's values and prove every operand's placement",
        "Needs helm on PATH (or $HELM); reports per cluster, pool and DaemonSet; exit 1 on any failure. Its "
        "placement predicate is checked against the real DaemonSet controller and scheduler by `sandbox probe` for "
        "the charts' own DaemonSets and the GPU Operator's operands, which NVIDIA's controller creates there "
        "(docs/sandbox.md).",
        exits="0 every cluster proven, 1 a proof failed, 2 bad input, no chart cache, or no helm or "
        "kubernetes-validate",
    )
    add_input_flags(parser)
    parser.add_argument("--cluster", help="only this cluster (default: every cluster)")
    parser.add_argument(
        "--charts",
        metavar="DIR",
        help=f"folder of chart directories named <chart>-<version> (default: the chart cache, ${CHART_CACHE_ENV} "
        f"or {DEFAULT_CHART_CACHE}, which `charts fetch` fills)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.charts.helm import HelmMissingError
    from themelio_gpu.plan.selection import select_cluster
    from themelio_gpu.verify.charts import VerifyError
    from themelio_gpu.verify.clusters import verify_clusters

    fleet = load(args)
    plans = [select_cluster(fleet, args.cluster)] if args.cluster else list(fleet.clusters)
    charts = Path(args.charts) if args.charts else chart_cache()
    if not charts.is_dir():
        problems = Problems()
        if args.charts:
            problems.add("command line", f"--charts {args.charts}", "no such folder of chart directories")
        else:
            problems.add(
                display_path(charts),
                "",
                "no chart cache yet: fetch the charts first (`python -m themelio_gpu charts fetch`), or name a "
                "folder of <chart>-<version> chart folders with --charts",
            )
        problems.raise_if_any()
    try:
        ok = verify_clusters(plans, charts, sys.stdout, is_cache=not args.charts)
    except (VerifyError, HelmMissingError) as error:
        print(f"verify: {error}", file=sys.stderr)
        return exits.BAD_INPUT
    return exits.OK if ok else exits.FAILED
