"""`terraform-check`: terraform init, validate and plan (backend removed) on every synthesized stack."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_command, add_input_flags, load
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.settings import fleet_folders

if TYPE_CHECKING:
    from themelio_gpu.verify.terraform import BuiltProviders


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
        "--fleet",
        dest="fleets",
        action="append",
        default=[],
        metavar="DIR",
        help="a fleet's folder (its catalog/gpu-catalog.yaml and stacks/) instead of --catalog and --stacks-dir; "
        "repeat it to check several fleets in one run (each stack reported as <folder>/<cluster>)",
    )
    parser.add_argument(
        "--cluster", action="extend", nargs="+", metavar="NAME", help="check only these stacks (repeatable)"
    )
    parser.add_argument("--no-plan", action="store_true", help="stop after terraform validate")
    parser.add_argument(
        "--built-providers",
        action="store_true",
        help="install HashiCorp's providers as `make sandbox-tools` built them from source, and stop after "
        "validate (their plan needs the cluster's API); a pin without a build of its own (CDK Terrain's) is "
        "validated with the newest build of its major version, as the sandbox applies it",
    )
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
    fleets, wrong = fleet_folders(args.fleets)
    if args.fleets and (args.catalog or args.stacks_dir or args.outdir or wanted):
        wrong.append(
            "--fleet names each fleet's folder: leave out --catalog, --stacks-dir, --outdir and --cluster"
        )
    if wrong:
        print(f"terraform-check: --fleet: {'; '.join(wrong)}", file=sys.stderr)
        return exits.BAD_INPUT

    def stacks_in(scratch: Path) -> dict[str, Path]:
        if args.outdir:
            return tf.outdir_stacks(Path(args.outdir), wanted)
        if not fleets:
            return tf.fleet_stacks(load(args), wanted, scratch)
        found: dict[str, Path] = {}
        labels = [Path(f).name for f in args.fleets]
        for number, (folder, paths) in enumerate(zip(args.fleets, fleets, strict=True)):
            label = labels[number] if labels.count(labels[number]) == 1 else folder.rstrip("/")
            fleet = load_fleet(paths.catalog, paths.stacks_dir)
            stacks = tf.fleet_stacks(fleet, [], scratch / f"fleet-{number}")
            found |= {f"{label}/{name}": path for name, path in stacks.items()}
        return found

    from themelio_gpu.sandbox.errors import MissingToolError

    try:
        built = _built_providers() if args.built_providers else None
    except MissingToolError as error:
        print(f"terraform-check: --built-providers: {error}", file=sys.stderr)
        return exits.BAD_INPUT
    plan = not (args.no_plan or args.built_providers)
    ok = tf.terraform_check(terraform, stacks_in, plan=plan, jobs=args.jobs, providers=built)
    return exits.OK if ok else exits.FAILED


def _built_providers() -> BuiltProviders:
    """The sandbox's builds of HashiCorp's providers (MissingToolError, exit 2, when they are not built)."""
    from themelio_gpu.sandbox import providers
    from themelio_gpu.sandbox.tools import load_tools, toolbox
    from themelio_gpu.verify.terraform import BuiltProviders

    builds = toolbox(tuple(name for name, tool in load_tools().items() if tool.provider))
    uses = providers.every_build(builds)
    return BuiltProviders(
        describe="providers: HashiCorp's, built from source by `make sandbox-tools` ("
        + ", ".join(f"{u.type} {u.built}" for u in uses)
        + "); validate only",
        mirror=lambda folder: providers.write_mirror(folder, builds, uses),
        prepare=lambda work: providers.write_override(work, builds.tools, "built_providers_override.tf.json"),
    )
