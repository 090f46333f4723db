"""Command-line entry points. Bad input ends in a list of `file: location: message` lines, never a traceback.

Exit codes: 0 success, 1 a check found a problem (drift, preflight, match, verify, terraform-check), 2 bad
input or a missing tool (helm or kubernetes-validate for verify, terraform for terraform-check).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from themelio_gpu.inputs import k8s_names
from themelio_gpu.inputs.catalog.catalog import Catalog, load_catalog
from themelio_gpu.inputs.catalog.products import PRODUCTS
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.contracts import (
    WALDUR_RESOURCE_QUOTA_NAME,
    closed_resource_quota,
    gpu_labels_config,
    kubeflow_spawner_gpus,
    kubeflow_workspacekind_pod_configs,
    resource_quota,
    waldur_backend_components,
    waldur_quota_mapping,
)
from themelio_gpu.outputs.kueue import kueue_objects
from themelio_gpu.outputs.yaml_output import dump_yaml
from themelio_gpu.plan.fleet import ClusterPlan, Fleet, load_fleet
from themelio_gpu.plan.quota import grant_notes, plan_quota, resolve_grants
from themelio_gpu.settings import CATALOG_ENV, STACKS_DIR_ENV, input_paths

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

# jsii prints a large banner about Node 20's end of life on every run; it says nothing about this app.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def _add_input_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--catalog", help=f"catalog file (default: ${CATALOG_ENV} or catalog/gpu-catalog.yaml)")
    parser.add_argument("--stacks-dir", help=f"cluster definitions (default: ${STACKS_DIR_ENV} or stacks/)")


def _load(args: argparse.Namespace) -> Fleet:
    paths = input_paths(args.catalog, args.stacks_dir)
    return load_fleet(paths.catalog, paths.stacks_dir)


def _load_catalog(args: argparse.Namespace) -> Catalog:
    path = input_paths(args.catalog, None).catalog
    problems = Problems()
    catalog = load_catalog(path, problems, display_path(path))
    problems.raise_if_any()
    assert catalog is not None
    return catalog


def report_input_errors(run: Callable[[], int]) -> int:
    try:
        return run()
    except InputError as error:
        count = len(error.problems)
        print(error.render(), file=sys.stderr)
        print(f"{count} problem{'s' if count != 1 else ''} found; nothing was written.", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:
        # An output folder that cannot be written, a file that vanished: say which and why.
        print(f"{error.filename or ''}: {error.strerror or error}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --- synth -------------------------------------------------------------------------------------------------


def _synth_parser(parser: argparse.ArgumentParser) -> None:
    _add_input_flags(parser)
    parser.add_argument("--outdir", help="output folder (default: $CDKTF_OUTDIR or cdktf.out)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines or summary")


def _synth(args: argparse.Namespace) -> int:
    from themelio_gpu.outputs.synth import summary_table, synthesize

    fleet = _load(args)
    synthesize(fleet, Path(args.outdir) if args.outdir else None, None if args.quiet else sys.stdout)
    if not args.quiet:
        print(summary_table(fleet))
    return EXIT_OK


def synth_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="main.py", description="Synthesize one Terraform stack per cluster.")
    _synth_parser(parser)
    args = parser.parse_args(argv)
    return report_input_errors(lambda: _synth(args))


# --- validate / catalog ------------------------------------------------------------------------------------


def _validate(args: argparse.Namespace) -> int:
    fleet = _load(args)
    print(f"OK: {len(fleet.catalog.offerings)} offerings, {len(fleet.clusters)} clusters")
    return EXIT_OK


def _catalog_validate(args: argparse.Namespace) -> int:
    catalog = _load_catalog(args)
    print(f"OK: {catalog.file}: {len(catalog.offerings)} offerings")
    return EXIT_OK


def _catalog_show(args: argparse.Namespace) -> int:
    fleet = _load(args)
    rows = [
        ("extended resource name", "DeviceClass", "product", "MIG", "quota key", "state", "aliases", "clusters")
    ]
    for o in fleet.catalog:
        rows.append(
            (
                o.name,
                o.device_class + (" (chart)" if o.served_by.value == "dra-driver-chart" else ""),
                o.product.key if o.product else "any",
                o.mig_profile or "-",
                o.quota_key,
                o.lifecycle.value,
                ", ".join(a.name for a in o.aliases) or "-",
                ", ".join(fleet.clusters_serving(o.name)) or "-",
            )
        )
    print(_table(rows))
    print()
    products = [("product", "NVML productName", "memory", "architecture", "MIG profiles (max per GPU)")]
    for p in PRODUCTS.values():
        mig = ", ".join(f"{name} x{count}" for name, count in p.mig_profiles.items()) or "no MIG"
        products.append((p.key, " | ".join(p.product_names), f"{p.memory_gib} GB", p.architecture, mig))
    print(_table(products))
    return EXIT_OK


CONTRACT_FILES: dict[str, Callable[[Catalog], Any]] = {
    "kubeflow-spawner-gpus.yaml": kubeflow_spawner_gpus,
    "kubeflow-workspacekind-podconfig.yaml": kubeflow_workspacekind_pod_configs,
    "gpu-labels.yaml": gpu_labels_config,
}


def contract_files(catalog: Catalog) -> dict[str, str]:
    """The catalog-wide files: what does not depend on a cluster's classes."""
    return {name: dump_yaml(make(catalog)) for name, make in CONTRACT_FILES.items()}


def _documents(objects: Sequence[Any]) -> str:
    return "".join(f"---\n{dump_yaml(o)}" for o in objects)


def cluster_contract_files(plan: ClusterPlan) -> dict[str, str]:
    """The files of one cluster: quotas and the consumers that follow its grant names."""
    quota = plan_quota(plan)
    kueue = kueue_objects(plan, quota)
    note = "".join(
        f"# pool {p}: its size is not known here, so its devices count 0; raise nominalQuota by hand\n"
        for p in kueue.unsized_pools
    )
    names = quota.grant_names
    return {
        "waldur-quota-mapping.yaml": dump_yaml(waldur_quota_mapping(plan, quota)),
        "waldur-backend-components.yaml": dump_yaml(waldur_backend_components(plan, quota)),
        "resource-quota-closed.yaml": dump_yaml(closed_resource_quota(quota)),
        "kueue.yaml": note + _documents(kueue.objects),
        "kubeflow-spawner-gpus.yaml": dump_yaml(kubeflow_spawner_gpus(plan.offerings, names)),
        "kubeflow-workspacekind-podconfig.yaml": dump_yaml(
            kubeflow_workspacekind_pod_configs(plan.offerings, names)
        ),
    }


def export_files(fleet: Fleet) -> dict[str, str]:
    """Relative path -> content of everything `catalog export` writes."""
    files = contract_files(fleet.catalog)
    for plan in fleet.clusters:
        for name, text in cluster_contract_files(plan).items():
            files[f"clusters/{plan.name}/{name}"] = text
    return files


def _catalog_export(args: argparse.Namespace) -> int:
    fleet = _load(args)
    files = export_files(fleet)  # everything computed before anything is written
    out = Path(args.out)
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {display_path(path)}")
    return EXIT_OK


def _catalog_quota(args: argparse.Namespace) -> int:
    fleet = _load(args)
    problems = Problems()
    for message in k8s_names.dns1123_label(args.namespace):
        problems.add("command line", f"--namespace {args.namespace}", message)
    requested: list[tuple[str, str, int]] = []
    for item in args.grants:
        name, sep, count = item.partition("=")
        if not sep or not count.isdigit():
            problems.add("command line", item, "write OFFERING=COUNT with a whole number, e.g. nvidia.com/a100=4")
        else:
            requested.append((item, name, int(count)))
    plan = fleet.cluster(args.cluster)
    if plan is None:
        known = ", ".join(c.name for c in fleet.clusters) or "none"
        problems.add("command line", f"--cluster {args.cluster}", f"no cluster of that name; known: {known}")
        problems.raise_if_any()
    assert plan is not None
    quota = plan_quota(plan)
    grants, found = resolve_grants(quota, plan, [(name, count) for _, name, count in requested])
    item_of = {name: item for item, name, _ in reversed(requested)}  # the first item naming it
    for name, message in found:
        problems.add("command line", item_of[name], message)
    problems.raise_if_any()
    hard = quota.hard(grants)
    print(dump_yaml(resource_quota(WALDUR_RESOURCE_QUOTA_NAME, args.namespace, hard)), end="")
    for note in grant_notes(quota, plan, grants):
        print(f"note: {note}", file=sys.stderr)
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    from themelio_gpu.outputs.schemas import schema_texts

    for path, text in schema_texts().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return EXIT_OK


# --- match / check / preflight -----------------------------------------------------------------------------


def _match(args: argparse.Namespace) -> int:
    from themelio_gpu.dryrun.cluster_match import match_command

    return match_command(_load(args), Path(args.slices), args.cluster, args.json)


def _check(args: argparse.Namespace) -> int:
    from themelio_gpu.outputs.synth import synthesize
    from themelio_gpu.verify.drift import compare_folders, render_diff

    fleet = _load(args)
    against = Path(args.against)
    with tempfile.TemporaryDirectory(prefix="themelio-check-") as tmp:
        synthesize(fleet, Path(tmp), progress=None)
        diff = compare_folders(against, Path(tmp))
    print(render_diff(diff, display_path(against)))
    return EXIT_OK if diff.identical else EXIT_FAILED


def _terraform_check(args: argparse.Namespace) -> int:
    from themelio_gpu.verify import terraform as tf

    try:
        terraform = tf.find_terraform()
    except tf.TerraformMissingError as error:
        print(f"terraform-check: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    start = time.monotonic()
    # Synthesized into a temporary folder: the check never writes into the project.
    with tempfile.TemporaryDirectory(prefix="themelio-terraform-check-synth-") as tmp:
        stacks = _stacks_to_check(args, Path(tmp))
        config = os.environ.get("TF_CLI_CONFIG_FILE")
        source = (
            f"TF_CLI_CONFIG_FILE={config}" if config else "the Terraform CLI configuration (default: the registry)"
        )
        plural = "s" if len(stacks) != 1 else ""
        print(
            f"terraform-check: {len(stacks)} stack{plural} with {tf.terraform_version(terraform)}; providers from {source}"
        )

        def report(result: tf.StackCheck) -> None:
            print(tf.render_result(result, plan=not args.no_plan), flush=True)

        results = tf.check_stacks(terraform, stacks, plan=not args.no_plan, jobs=args.jobs, on_result=report)
    print(tf.render_summary(results, plan=not args.no_plan, seconds=time.monotonic() - start))
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _stacks_to_check(args: argparse.Namespace, tmp: Path) -> dict[str, Path]:
    from themelio_gpu.verify.terraform import stack_folders

    problems = Problems()
    wanted: list[str] = list(dict.fromkeys(args.cluster or ()))
    if args.outdir:
        outdir = Path(args.outdir)
        stacks = stack_folders(outdir)
        if not stacks:
            problems.add(
                display_path(outdir), "", "no synthesized stacks (stacks/<name>/cdk.tf.json); synthesize first"
            )
        known = list(stacks)
    else:
        fleet = _load(args)
        known = [c.name for c in fleet.clusters]
    for name in wanted:
        if name not in known and known:
            problems.add("command line", f"--cluster {name}", f"no stack of that name; known: {', '.join(known)}")
    problems.raise_if_any()
    if not args.outdir:
        from themelio_gpu.outputs.synth import synthesize

        selected = [c for c in fleet.clusters if not wanted or c.name in wanted]
        synthesize(dataclasses.replace(fleet, clusters=tuple(selected)), tmp, progress=None)
        stacks = stack_folders(tmp)
    return {name: path for name, path in stacks.items() if not wanted or name in wanted}


def _preflight(args: argparse.Namespace) -> int:
    from themelio_gpu.live.preflight import run_preflight

    plan = _select_cluster(_load(args), args.cluster)
    return run_preflight(plan, sys.stdout, kubeconfig=args.kubeconfig, context=args.context)


def _select_cluster(fleet: Fleet, name: str) -> ClusterPlan:
    plan = fleet.cluster(name)
    if plan is None:
        problems = Problems()
        known = ", ".join(c.name for c in fleet.clusters)
        problems.add("command line", name, f"no cluster of that name; known: {known}")
        problems.raise_if_any()
    assert plan is not None
    return plan


def _verify(args: argparse.Namespace) -> int:
    from themelio_gpu.verify.charts import VerifyError
    from themelio_gpu.verify.command import verify_clusters

    fleet = _load(args)
    plans = [_select_cluster(fleet, args.cluster)] if args.cluster else list(fleet.clusters)
    charts = Path(args.charts) if args.charts else None
    if charts is not None and not charts.is_dir():
        problems = Problems()
        problems.add("command line", f"--charts {args.charts}", "no such folder of chart directories")
        problems.raise_if_any()
    try:
        return EXIT_OK if verify_clusters(plans, charts, sys.stdout) else EXIT_FAILED
    except VerifyError as error:
        print(f"verify: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m themelio_gpu", description="Themelio GPU stacks")
    commands = parser.add_subparsers(dest="command", required=True)

    synth = commands.add_parser("synth", help="synthesize every cluster (what main.py does)")
    _synth_parser(synth)
    synth.set_defaults(run=_synth)

    validate = commands.add_parser("validate", help="check the catalog and every cluster definition")
    _add_input_flags(validate)
    validate.set_defaults(run=_validate)

    catalog = commands.add_parser("catalog", help="the GPU catalog").add_subparsers(
        dest="catalog_command", required=True
    )
    cv = catalog.add_parser("validate", help="check the catalog file alone")
    _add_input_flags(cv)
    cv.set_defaults(run=_catalog_validate)
    cs = catalog.add_parser("show", help="offerings, products, MIG profiles, quota keys, clusters")
    _add_input_flags(cs)
    cs.set_defaults(run=_catalog_show)
    ce = catalog.add_parser(
        "export", help="write the Kubeflow and gpuLabel files, and per cluster Waldur, quota and Kueue files"
    )
    _add_input_flags(ce)
    ce.add_argument("--out", default="catalog/generated", help="folder to write (default: catalog/generated)")
    ce.set_defaults(run=_catalog_export)
    cq = catalog.add_parser(
        "quota", help="a namespace's ResourceQuota for one cluster: the grants, and 0 on every other GPU path"
    )
    _add_input_flags(cq)
    cq.add_argument("--cluster", required=True, help="the cluster whose DeviceClasses the quota must close")
    cq.add_argument("--namespace", required=True)
    cq.add_argument(
        "grants",
        nargs="*",
        metavar="OFFERING=COUNT",
        help="e.g. nvidia.com/a100=4; an alias name puts that part of the grant on the old name",
    )
    cq.set_defaults(run=_catalog_quota)

    schema = commands.add_parser("schema", help="rewrite the JSON Schemas of the catalog and cluster files")
    schema.set_defaults(run=_schema)

    match = commands.add_parser("match", help="which devices each offering's DeviceClass selects (offline)")
    _add_input_flags(match)
    match.add_argument("--slices", required=True, help="kubectl get resourceslices -o json (or -o yaml) output")
    match.add_argument("--cluster", help="cluster whose classes to use (default: every offering in the catalog)")
    match.add_argument("--json", action="store_true", help="print the report as JSON")
    match.set_defaults(run=_match)

    check = commands.add_parser("check", help="exit 1 when the synthesized output differs from a folder")
    _add_input_flags(check)
    check.add_argument("--against", default="cdktf.out", help="committed synthesized output (default: cdktf.out)")
    check.set_defaults(run=_check)

    terraform = commands.add_parser(
        "terraform-check", help="terraform init, validate and plan (backend removed) on every synthesized stack"
    )
    _add_input_flags(terraform)
    terraform.add_argument(
        "--outdir", help="check this synthesized output (e.g. cdktf.out) instead of synthesizing the fleet"
    )
    terraform.add_argument(
        "--cluster", action="extend", nargs="+", metavar="NAME", help="check only these stacks (repeatable)"
    )
    terraform.add_argument("--no-plan", action="store_true", help="stop after terraform validate")
    terraform.add_argument(
        "--jobs", type=int, default=4, metavar="N", help="stacks validated and planned at once (default 4)"
    )
    terraform.set_defaults(run=_terraform_check)

    preflight = commands.add_parser("preflight", help="read-only checks of a live cluster against its definition")
    _add_input_flags(preflight)
    preflight.add_argument("cluster")
    preflight.add_argument("--kubeconfig", help="override the definition's kubeconfig path")
    preflight.add_argument("--context", help="override the definition's kubeconfig context")
    preflight.set_defaults(run=_preflight)

    verify = commands.add_parser(
        "verify", help="render the real charts with the stack's values and prove every operand's placement"
    )
    _add_input_flags(verify)
    verify.add_argument("--cluster", help="only this cluster (default: every cluster)")
    verify.add_argument(
        "--charts",
        help="folder of chart directories named <chart>-<version> (default: helm pull from each release's repository)",
    )
    verify.set_defaults(run=_verify)
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return report_input_errors(lambda: run(args))
