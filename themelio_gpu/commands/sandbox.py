"""`python -m themelio_gpu sandbox ...`: try a cluster's stack on a real control plane, no GPU needed.

tools [TOOL ...]        build the pinned tools that are missing (`make sandbox-tools`)
up CLUSTER              control plane, nodes, GPUs (ResourceSlices) and chart repository
apply CLUSTER           init + apply the stack, then a plan that must show no changes
plan CLUSTER            plan against the sandbox: exit 0 no changes, 2 changes (terraform's -detailed-exitcode)
kubeconfig CLUSTER      print the sandbox's kubeconfig path (as `kind get kubeconfig` prints the config)
down CLUSTER            destroy what apply created, list what is left, stop everything, remove the folder
run CLUSTER             up, apply, second plan, destroy, down: what CI runs on every stack
upgrade CLUSTER --from REF  REF's stack, GPUs in use, then the work tree's: the real plan beside `changed`'s
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands
from themelio_gpu.sandbox.deploy import RUNNERS as ENGINES

if TYPE_CHECKING:
    from themelio_gpu.plan.model import ClusterPlan
    from themelio_gpu.sandbox.cluster import Sandbox
    from themelio_gpu.sandbox.daemonsets import Predicted
    from themelio_gpu.sandbox.tools import Toolbox

EXITS = {
    "up": "0 up, 1 the control plane or a node could not be started (nothing is left), 2 bad input, a missing "
    "tool or chart, a port in use, or a sandbox of that cluster is up already",
    "apply": "0 applied and the next plan shows no changes, 1 the apply failed (the provider's own error is "
    "printed; the sandbox stays for a look) or the next plan shows changes, 2 bad input or no sandbox",
    "plan": "0 no changes, 1 error, 2 changes (as terraform plan -detailed-exitcode)",
    "kubeconfig": "0 printed, 2 no sandbox of that cluster",
    "down": "0 destroyed and stopped with nothing left, 1 destroy failed or objects are left (listed), 2 bad input",
    "run": "0 every step passed, 1 a step failed (the sandbox is removed unless --keep), 2 bad input",
    "probe": "0 every pod landed where the model says with the devices its offering names, 1 a row disagrees "
    "(both answers shown), 2 bad input or no sandbox",
    "upgrade": "0 applied in one go, every address as `changed` predicts and the next plan empty, 1 a disagreement, "
    "a failed apply or a second plan with changes (the sandbox stays up for a look), 2 bad input: no such revision "
    "or cluster, a dirty work tree, no sandbox tools",
    "check": "0 every chosen cluster passed `run`, 1 one failed (each is listed), 2 bad input",
    "tools": "0 every tool is built, 1 a build failed (the end of its log is printed), 2 no Go or no such tool",
}


def _fleet_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--catalog", metavar="FILE", help="the GPU catalog (default: catalog/gpu-catalog.yaml)")
    parser.add_argument("--stacks-dir", metavar="DIR", help="folder of cluster definitions (default: stacks/)")
    parser.add_argument("--charts", metavar="DIR", help="the chart cache (default: .cache/charts)")


def register(commands: Commands) -> None:
    """Add `sandbox` and its subcommands to the CLI's parser."""
    group = commands.add_parser(
        "sandbox",
        help="apply a cluster's stack to a real control plane on this machine (kwok nodes, no GPU needed)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = group.add_subparsers(dest="sandbox_command", required=True, metavar="SUBCOMMAND")
    tools = sub.add_parser(
        "tools",
        help="build the pinned tools that are missing",
        description="Build every tool of themelio_gpu/sandbox/tools.toml that is not built yet, from its Go module, "
        "into the tool cache ($THEMELIO_TOOLS_CACHE or ~/.cache/themelio-gpu/tools); what `make sandbox-tools` runs.",
        epilog=f"exit codes: {EXITS['tools']}",
    )
    tools.add_argument("names", nargs="*", metavar="TOOL", help="only these (default: every tool of tools.toml)")
    tools.add_argument("--jobs", type=int, default=2, help="builds at once (default 2)")
    tools.add_argument("--force", action="store_true", help="build again even when built")
    tools.set_defaults(run=run, sandbox_run="tools")
    for name, summary in (
        ("up", "start a sandbox of the cluster"),
        ("apply", "apply the cluster's stack to its sandbox, then plan again"),
        ("plan", "plan the cluster's stack against its sandbox"),
        ("kubeconfig", "print the path of the sandbox's kubeconfig"),
        ("down", "destroy the stack, stop the sandbox and remove its folder"),
        ("probe", "ask the real scheduler for every GPU name the applied stack serves"),
        ("run", "up, apply, plan, destroy and down in one go"),
    ):
        parser = sub.add_parser(name, help=summary, description=f"{summary[0].upper()}{summary[1:]}.",
                                epilog=f"exit codes: {EXITS[name]}")  # fmt: skip
        parser.add_argument("cluster", metavar="CLUSTER", help="the cluster's name (its file in stacks/)")
        _fleet_flags(parser)
        if name in ("up", "run"):
            parser.add_argument(
                "--port", type=int, help="the API server's port on 127.0.0.1 (default: a free one)"
            )
            parser.add_argument("--keep", action="store_true", help="on failure, keep the sandbox for a look")
        if name in ("probe", "run"):
            parser.add_argument(
                "--json",
                action="store_true",
                help="the probe's rows as JSON, alone on stdout (the summary on stderr)",
            )
        if name == "run":
            parser.add_argument("--probe", action="store_true", help="probe after apply; a disagreeing row fails")
        if name in ("apply", "plan", "down", "run"):
            parser.add_argument("--with", dest="runner", choices=ENGINES, default="terraform",
                                help="terraform (default), tofu, or cdktf (the CDKTF CLI's deploy/diff/destroy)")  # fmt: skip
        parser.set_defaults(run=run, sandbox_run=name, daemonset_model=verify_prediction)
    upgrade = sub.add_parser(
        "upgrade",
        help="apply the cluster's stack of a git revision, hold GPUs, then apply the work tree's",
        description="The sandbox (brought up at REF's definition if none is up) gets REF's stack, workloads that "
        "hold GPUs start, then the work tree's stack is planned, compared address by address with `changed "
        "--base-ref REF`, applied once and planned again (docs/day-two.md).",
        epilog=f"exit codes: {EXITS['upgrade']}",
    )
    upgrade.add_argument("cluster", metavar="CLUSTER", help="the cluster's name (its file in stacks/)")
    upgrade.add_argument("--from", dest="from_ref", required=True, metavar="REF",
                         help="the git revision (branch, tag, SHA) whose stack is deployed before the change")  # fmt: skip
    _fleet_flags(upgrade)
    upgrade.add_argument("--with", dest="runner", choices=("terraform", "tofu"), default="terraform",
                         help="terraform (default) or tofu")  # fmt: skip
    upgrade.add_argument("--json", action="store_true", help="the report as one JSON document")
    upgrade.set_defaults(run=run, sandbox_run="upgrade", port=None, keep=False)
    check = sub.add_parser(
        "check",
        help="run every chosen cluster's stack through up, apply, plan, destroy and down",
        description="`sandbox run` on the named clusters, on every cluster (--every), or by default on the fewest "
        "clusters that cover every pool kind, DRA mode, chart version and Kubernetes minor of the fleet and serve every "
        "offering and alias it has.",
        epilog=f"exit codes: {EXITS['check']}",
    )
    check.add_argument("clusters", nargs="*", metavar="CLUSTER", help="these clusters (default: a covering set)")
    check.add_argument("--every", action="store_true", help="every cluster of the fleet")
    _fleet_flags(check)
    check.add_argument("--fleet", dest="fleets", action="append", default=[], metavar="DIR",
                       help="a fleet's folder (its catalog/gpu-catalog.yaml and stacks/), instead of --catalog and "
                       "--stacks-dir; repeat it to check several fleets in one go")  # fmt: skip
    check.add_argument("--with", dest="runner", choices=ENGINES, default="terraform", help="as for run")
    check.add_argument("--probe", action="store_true", help="probe every cluster after apply")
    check.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="clusters checked at once, each a `sandbox run` of its own (default 1)")  # fmt: skip
    check.set_defaults(
        run=run, sandbox_run="check", port=None, keep=False, json=False, daemonset_model=verify_prediction
    )


def verify_prediction(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[Predicted]:
    """What `sandbox probe` compares the DaemonSet controller with: verify's prediction, from the layer above the
    sandbox's (the sandbox cannot import verify)."""
    from themelio_gpu.verify.sandbox_prediction import predict

    return predict(plan, sandbox, toolbox)


def run(args: argparse.Namespace) -> int:
    """The exit code of a sandbox subcommand: its failures are one message each, never a traceback."""
    from themelio_gpu.sandbox.workflow import SUBCOMMANDS

    return on_sandbox(lambda: SUBCOMMANDS[args.sandbox_run](args))


def on_sandbox(work: Callable[[], int]) -> int:
    """`work`'s exit code, a sandbox's failure as one `sandbox: ...` line: 2 for bad usage (no such sandbox, a
    port in use, a tool not built), 1 for what went wrong on the sandbox. `trial --sandbox` shares it."""
    from themelio_gpu.sandbox.errors import SandboxError, SandboxUsageError

    try:
        return work()
    except SandboxUsageError as error:
        print(f"sandbox: {error}", file=sys.stderr)
        return exits.BAD_INPUT
    except SandboxError as error:
        print(f"sandbox: {error}", file=sys.stderr)
        return exits.FAILED
