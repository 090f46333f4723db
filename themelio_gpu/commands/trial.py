"""`trial`: two or more offerings side by side on ResourceSlices: which devices each could be given; with
`--sandbox`, on a sandbox's ResourceSlices, each offering's claim also allocated by the real scheduler."""

from __future__ import annotations

import argparse
from pathlib import Path

from themelio_gpu.commands.base import BAD_INPUT, Commands, add_command, add_input_flags, load_catalog_only
from themelio_gpu.inputs.problems import Problems


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "trial",
        "two or more offerings side by side on ResourceSlices: which devices each could be given",
        "Reads the catalog alone (no cluster definition) with --slices; with --sandbox, the cluster's definition "
        "too. The offline trial is the CEL evaluator's answer; --sandbox checks it against the real "
        "kube-scheduler's allocations. Exit 1 when the trial finds a problem.",
        exits=f"0 every device each offering selects meets its definition (and, with --sandbox, every allocation "
        f"is one the trial predicts), 1 one does not or an offering selects nothing, {BAD_INPUT}",
    )
    add_input_flags(parser)
    parser.add_argument("--slices", metavar="FILE", help="kubectl get resourceslices -o yaml (or -o json) output")
    parser.add_argument(
        "--sandbox",
        metavar="CLUSTER",
        help="the ResourceSlices of CLUSTER's sandbox (`sandbox up` and `sandbox apply` first), and each offering "
        "submitted there as a ResourceClaimTemplate and a pod, for the real scheduler to allocate",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "offerings", nargs="+", metavar="OFFERING", help="extended resource names, e.g. nvidia.com/h100"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if bool(args.slices) == bool(args.sandbox):
        problems = Problems()
        problems.add("command line", "--slices/--sandbox", "give one of --slices FILE and --sandbox CLUSTER")
        problems.raise_if_any()
    if args.sandbox:
        from themelio_gpu.commands.sandbox import on_sandbox
        from themelio_gpu.sandbox.workflow import trial

        return on_sandbox(lambda: trial(args))
    from themelio_gpu.dryrun.trial import trial_command

    return trial_command(load_catalog_only(args), Path(args.slices), args.offerings, args.json)
