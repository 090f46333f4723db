"""Command-line entry points: `python -m themelio_gpu <command>` and main.py. Bad input ends in a list of
`file: location: message` lines, never a traceback.

Each command is a module of themelio_gpu/commands/ (its parser, its exit codes, what it runs). Exit codes
(exits.py): 0 success, 1 a check found a problem (drift, preflight, match, trial, verify,
terraform-check), 2 bad input or a missing tool (helm or kubernetes-validate for verify, terraform for
terraform-check), 128 + signal when interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from themelio_gpu import engine, exits, interrupts, speedups
from themelio_gpu.commands import (
    catalog,
    changed,
    charts,
    check,
    compare_engines,
    match,
    pipeline,
    preflight,
    sandbox,
    schema,
    synth,
    terraform_check,
    trial,
    validate,
    verify,
)
from themelio_gpu.commands.base import add_version_flag
from themelio_gpu.inputs.problems import InputError
from themelio_gpu.outputs.output_folder import OutputWriteError
from themelio_gpu.plan.helm.known_values import KnownValuesTableError

# jsii prints a large banner about Node 20's end of life on every run; it says nothing about this app.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

EXIT_CODES = "exit codes: 0 success, 1 the check found a problem, 2 bad input; each command's --help gives its own"
# In the order `--help` lists them.
COMMANDS: tuple[ModuleType, ...] = (synth, validate, catalog, schema, match, trial, check, terraform_check)
COMMANDS += (compare_engines, changed, pipeline, preflight, verify, charts, sandbox)


def report_input_errors(run: Callable[[], int]) -> int:
    """`run`'s exit code; bad input, a setting that cannot be used and an interrupt as messages and exit codes."""
    from themelio_gpu.outputs.synth import StateAtRiskError

    try:
        # A setting that names no engine or no speed-up stops every command before any work.
        engine.selected()
        speedups.switched_off()
        return run()
    except InputError as error:
        count = len(error.problems)
        print(error.render(), file=sys.stderr)
        print(f"{count} problem{'s' if count != 1 else ''} found; nothing was written.", file=sys.stderr)
        return exits.BAD_INPUT
    except (
        OutputWriteError,
        StateAtRiskError,
        speedups.SpeedupsSettingError,
        engine.EngineSettingError,
        KnownValuesTableError,
    ) as error:
        print(error, file=sys.stderr)
        return exits.BAD_INPUT
    except engine.KernelStartError as error:
        print(error, file=sys.stderr)
        return exits.FAILED
    except interrupts.Interrupted as interrupted:
        print(interrupted.message(), file=sys.stderr)
        return interrupted.exit_code
    except OSError as error:
        # A file that vanished or cannot be read: say which and why.
        print(f"{error.filename or ''}: {error.strerror or error}", file=sys.stderr)
        return exits.BAD_INPUT


def synth_main(argv: Sequence[str]) -> int:
    """main.py: `synth` alone."""
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="Synthesize one Terraform stack per cluster into <outdir>/stacks/<cluster>/cdk.tf.json. "
        "Other commands: python -m themelio_gpu --help",
        epilog=synth.EXITS,
    )
    synth.add_arguments(parser)
    add_version_flag(parser)
    interrupts.install()
    args = parser.parse_args(argv)
    return report_input_errors(lambda: synth.run(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m themelio_gpu",
        description="Themelio GPU stacks: one GPU catalog turned into one Terraform stack per Kubernetes cluster. "
        "Every command reads the catalog and the cluster definitions (see --catalog and --stacks-dir).",
        epilog=EXIT_CODES,
    )
    add_version_flag(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str]) -> int:
    interrupts.install()
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return report_input_errors(lambda: run(args))
