"""`terraform-check`: terraform init, validate and plan (backend removed) on every synthesized stack."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_command, add_input_flags, load


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "terraform-check",
        "terraform init, validate and plan (backend removed) on every synthesized stack",
        "Providers come from wherever Terraform gets them: the registry, or a mirror named in TF_CLI_CONFIG_FILE.",
        exits="0 every stack passed, 1 a stack failed, 2 bad input or no terraform",
    )
    add_input_flags(parser)
    parser.add_argument(
        "--outdir", help="check this synthesized output (e.g. cdktf.out) instead of synthesizing the fleet"
    )
    parser.add_argument(
        "--cluster", action="extend", nargs="+", metavar="NAME", help="check only these stacks (repeatable)"
    )
    parser.add_argument("--no-plan", action="store_true", help="stop after terraform validate")
    parser.add_argument(
        "--jobs", type=int, default=4, metavar="N", help="stacks validated and planned at once (default 4)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.verify import terraform as tf

    try:
        terraform = tf.find_terraform()
    except tf.TerraformMissingError as error:
        print(f"terraform-check: {error}", file=sys.stderr)
        return exits.BAD_INPUT
    wanted: list[str] = list(dict.fromkeys(args.cluster or ()))

    def stacks_in(scratch: Path) -> dict[str, Path]:
        if args.outdir:
            return tf.outdir_stacks(Path(args.outdir), wanted)
        return tf.fleet_stacks(load(args), wanted, scratch)

    ok = tf.terraform_check(terraform, stacks_in, plan=not args.no_plan, jobs=args.jobs)
    return exits.OK if ok else exits.FAILED
