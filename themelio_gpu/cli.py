"""Command-line entry points. Bad input ends in a list of `file: location: message` lines, never a traceback.

Exit codes: 0 success, 1 a check found a problem (drift, preflight, match, trial, verify,
terraform-check), 2 bad input or a missing tool (helm or kubernetes-validate for verify, terraform for terraform-check).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from themelio_gpu import __version__, engine, interrupts, speedups
from themelio_gpu.inputs.catalog.catalog import Catalog, ResolvedOffering, load_catalog
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.outputs.output_folder import OutputWriteError
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.helm.known_values import KnownValuesTableError
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.plan.quota import grant_notes, plan_quota, resolve_grants
from themelio_gpu.render.contracts import (
    WALDUR_RESOURCE_QUOTA_NAME,
    closed_resource_quota,
    cluster_notebook_choices,
    fleet_choices,
    gpu_labels_config,
    kubeflow_spawner_gpus,
    kubeflow_workspacekind_pod_configs,
    resource_quota,
    unreachable_grants,
    waldur_backend_components,
    waldur_quota_mapping,
)
from themelio_gpu.render.kueue import kueue_objects
from themelio_gpu.render.polyaxon import preset_files as polyaxon_preset_files
from themelio_gpu.render.yaml_output import dump_yaml
from themelio_gpu.sandbox import command as sandbox_command
from themelio_gpu.settings import (
    CATALOG_ENV,
    CHART_CACHE_ENV,
    DEFAULT_CHART_CACHE,
    DEFAULT_INPUTS,
    DEFAULT_OUTDIR,
    STACKS_DIR_ENV,
    SYNTH_COMMAND,
    chart_cache,
    input_paths,
)
from themelio_gpu.words import count

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

# jsii prints a large banner about Node 20's end of life on every run; it says nothing about this app.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


EXIT_CODES = "exit codes: 0 success, 1 the check found a problem, 2 bad input; each command's --help gives its own"
BAD_INPUT = "2 bad input (every problem is listed)"
SYNTH_EXITS = (
    "exit codes: 0 written, 2 bad input or an output folder that cannot be written (every problem is listed; "
    "nothing is written), 130/143 interrupted by SIGINT/SIGTERM (the output is wholly the old or wholly the "
    "new one, as the message says)"
)


def _add_input_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--catalog", metavar="FILE", help=f"the GPU catalog (default: ${CATALOG_ENV} or catalog/gpu-catalog.yaml)"
    )
    parser.add_argument(
        "--stacks-dir",
        metavar="DIR",
        help=f"folder of cluster definitions, one *.yaml per cluster (default: ${STACKS_DIR_ENV} or stacks/)",
    )


class _VersionAction(argparse.Action):
    """--version: the text as it is (argparse's own action rewraps it), read only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(version_text())
        parser.exit()


def _add_version_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version",
        action=_VersionAction,
        nargs=0,
        help="print the version, the engine and its bindings, and exit",
    )


def version_text() -> str:
    """This tool's version, the engine THEMELIO_ENGINE selects and its bindings, as installed."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(distribution: str, pinned: str) -> str:
        try:
            found = version(distribution)
        except PackageNotFoundError:
            return f"{distribution} not installed (pinned: {pinned})"
        return f"{distribution} {found}" + ("" if found == pinned else f" (pinned: {pinned})")

    try:
        chosen = engine.selected()
    except engine.EngineSettingError as error:
        return f"themelio-gpu {__version__}; {error}"
    parts = [installed(chosen.distribution, chosen.version)]
    for bindings in (chosen.kubernetes, chosen.helm):
        _, source, provider = bindings.provider
        parts.append(f"{installed(bindings.distribution, bindings.version)} ({source} {provider})")
    return f"themelio-gpu {__version__}, engine {chosen.name} (${engine.ENV}): " + ", ".join(parts)


def _not_here(args: argparse.Namespace) -> None:
    """Run from a folder without the default inputs (not the checkout): one message saying where to run, instead
    of a missing catalog and a missing stacks folder."""
    named = getattr(args, "catalog", None) or getattr(args, "stacks_dir", None)
    paths = input_paths(None, None)
    if named or paths != DEFAULT_INPUTS or paths.catalog.exists() or paths.stacks_dir.exists():
        return
    problems = Problems()
    problems.add(
        f"{paths.catalog}, {paths.stacks_dir}/",
        "",
        f"neither is in {Path.cwd()}: run the command from the folder that holds your catalog/ and stacks/ "
        f"(the checkout), or name them with --catalog and --stacks-dir (or ${CATALOG_ENV}, ${STACKS_DIR_ENV})",
    )
    problems.raise_if_any()


def _load(args: argparse.Namespace) -> Fleet:
    _not_here(args)
    paths = input_paths(args.catalog, args.stacks_dir)
    fleet = load_fleet(paths.catalog, paths.stacks_dir)
    for warning in fleet.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return fleet


def _load_catalog(args: argparse.Namespace) -> Catalog:
    _not_here(args)
    path = input_paths(args.catalog, None).catalog
    problems = Problems()
    catalog = load_catalog(path, problems, display_path(path))
    problems.raise_if_any()
    assert catalog is not None
    return catalog


def report_input_errors(run: Callable[[], int]) -> int:
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
        return EXIT_BAD_INPUT
    except (
        OutputWriteError,
        StateAtRiskError,
        speedups.SpeedupsSettingError,
        engine.EngineSettingError,
        KnownValuesTableError,
    ) as error:
        print(error, file=sys.stderr)
        return EXIT_BAD_INPUT
    except engine.KernelStartError as error:
        print(error, file=sys.stderr)
        return EXIT_FAILED
    except interrupts.Interrupted as interrupted:
        print(interrupted.message(), file=sys.stderr)
        return interrupted.exit_code
    except OSError as error:
        # A file that vanished or cannot be read: say which and why.
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
    parser.add_argument(
        "--outdir",
        metavar="DIR",
        help=f"output folder; stack folders of clusters that no longer exist are removed from it "
        f"(default: $CDKTF_OUTDIR or {DEFAULT_OUTDIR})",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress lines or summary (removed stack folders are still named)"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="synthesize every stack (default: only those whose inputs changed since their files were written; "
        "the others' files stay, the same bytes either way)",
    )
    # Synthesis runs in one process since workers stopped paying (docs/performance.md); pipelines that
    # still pass the flag keep working.
    parser.add_argument("--workers", help=argparse.SUPPRESS)


def _synth(args: argparse.Namespace) -> int:
    from themelio_gpu.outputs.synth import summary_table, synthesize_files

    if args.workers is not None:
        print("note: --workers is no longer used: synthesis runs in one process", file=sys.stderr)
    _not_here(args)
    outdir, progress = Path(args.outdir) if args.outdir else None, None if args.quiet else sys.stdout
    paths = input_paths(args.catalog, args.stacks_dir)
    fleet, result = synthesize_files(paths, outdir, progress, full=args.full)
    for warning in [*map(str, fleet.warnings), *result.warnings]:
        print(f"warning: {warning}", file=sys.stderr)
    if not args.quiet:
        print(summary_table(result.summary))
    return EXIT_OK


def synth_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="Synthesize one Terraform stack per cluster into <outdir>/stacks/<cluster>/cdk.tf.json. "
        "Other commands: python -m themelio_gpu --help",
        epilog=SYNTH_EXITS,
    )
    _synth_parser(parser)
    _add_version_flag(parser)
    interrupts.install()
    args = parser.parse_args(argv)
    return report_input_errors(lambda: _synth(args))


# --- validate / catalog ------------------------------------------------------------------------------------


def _validate(args: argparse.Namespace) -> int:
    from themelio_gpu.render.schemas import schema_warnings

    fleet = _load(args)
    for advice in fleet.advice:
        print(f"warning: {advice}", file=sys.stderr)
    for warning in schema_warnings(input_paths(args.catalog, args.stacks_dir)):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"OK: {count(len(fleet.catalog.offerings), 'offering')}, {count(len(fleet.clusters), 'cluster')}")
    return EXIT_OK


def _catalog_validate(args: argparse.Namespace) -> int:
    catalog = _load_catalog(args)
    print(f"OK: {catalog.file}: {count(len(catalog.offerings), 'offering')}")
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
                _product_column(o),
                o.mig_profile or ("any profile" if o.capability and o.is_mig else "-"),
                o.quota_key,
                o.lifecycle.value,
                ", ".join(a.name for a in o.aliases) or "-",
                ", ".join(fleet.clusters_serving(o.name)) or "-",
            )
        )
    print(_table(rows))
    print()
    products = [
        ("product", "NVML productName", "published memory", "architecture", "CC", "MIG profiles (max per GPU)")
    ]
    for p in fleet.catalog.products.values():
        mig = ", ".join(f"{name} x{count}" for name, count in p.mig_profiles.items()) or "no MIG"
        products.append(
            (
                p.key,
                " | ".join(p.product_names),
                f"{p.memory_gib:.2f} GiB",
                p.architecture,
                p.compute_capability,
                mig,
            )
        )
    print(_table(products))
    return EXIT_OK


def _product_column(offering: ResolvedOffering) -> str:
    if offering.capability is not None:
        return offering.capability.describe()
    return offering.product.key if offering.product else "any"


CONTRACT_FILES: dict[str, Callable[[Sequence[ResolvedOffering]], Any]] = {
    "kubeflow-spawner-gpus.yaml": kubeflow_spawner_gpus,
    "kubeflow-workspacekind-podconfig.yaml": kubeflow_workspacekind_pod_configs,
    "gpu-labels.yaml": gpu_labels_config,
}


def contract_files(fleet: Fleet) -> dict[str, str]:
    """The fleet-wide files: what does not depend on a cluster's classes (a file with nothing in it is left out).
    An offering only reserved pools serve is left out, each file saying why (outputs/contracts.py)."""
    choices = fleet_choices(fleet.catalog, fleet.clusters)
    note = "".join(f"# {line}\n" for line in choices.left_out)
    made = {name: make(choices.offerings) for name, make in CONTRACT_FILES.items()}
    return {name: note + dump_yaml(data) for name, data in made.items() if data is not None}


def _documents(objects: Sequence[Any]) -> str:
    return "".join(f"---\n{dump_yaml(o)}" for o in objects)


def cluster_contract_files(plan: ClusterPlan) -> dict[str, str]:
    """The files of one cluster: quotas and the consumers that follow its grant names."""
    quota = plan_quota(plan)
    kueue = kueue_objects(plan, quota)
    note = "".join(f"# {line}\n" for line in kueue.notes)
    names = quota.grant_names
    notebooks = cluster_notebook_choices(plan)
    notebook_note = "".join(f"# {line}\n" for line in notebooks.left_out)
    files = {
        "waldur-quota-mapping.yaml": dump_yaml(waldur_quota_mapping(plan, quota)),
        "waldur-backend-components.yaml": dump_yaml(waldur_backend_components(plan, quota)),
        "resource-quota-closed.yaml": dump_yaml(closed_resource_quota(quota, plan.names)),
        "kueue.yaml": note + _documents(kueue.objects),
        "kubeflow-spawner-gpus.yaml": notebook_note + dump_yaml(kubeflow_spawner_gpus(notebooks.offerings, names)),
    }
    # Notebooks 2.0 wants at least one podConfig option: a cluster without a notebook choice has no fragment.
    pod_configs = kubeflow_workspacekind_pod_configs(notebooks.offerings, names)
    if pod_configs is not None:
        files["kubeflow-workspacekind-podconfig.yaml"] = notebook_note + dump_yaml(pod_configs)
    # Polyaxon: one preset per offering, each a file of its own (one operation per Polyaxonfile).
    files.update(polyaxon_preset_files(plan, quota))
    return files


def export_files(fleet: Fleet) -> dict[str, str]:
    """Relative path -> content of everything `catalog export` writes."""
    files = contract_files(fleet)
    for plan in fleet.clusters:
        for name, text in cluster_contract_files(plan).items():
            files[f"clusters/{plan.name}/{name}"] = text
    return files


def _catalog_export(args: argparse.Namespace) -> int:
    fleet = _load(args)
    files = export_files(fleet)  # everything computed before anything is written
    if args.out is None:
        # Nothing is written unless asked: the files go to stdout as one YAML stream, one document each.
        for name, text in files.items():
            print(f"--- # {name}")
            print(text, end="")
        return EXIT_OK
    out = Path(args.out)
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {display_path(path)}")
    return EXIT_OK


def check_namespace(namespace: str, problems: Problems, flag: str = "--namespace") -> None:
    """A namespace given on the command line must be a valid Namespace name (a DNS-1123 label)."""
    for message in k8s_names.dns1123_label(namespace):
        problems.add("command line", f"{flag} {namespace}", f"not a valid namespace: {message}")


def _catalog_quota(args: argparse.Namespace) -> int:
    fleet = _load(args)
    problems = Problems()
    check_namespace(args.namespace, problems)
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
    print(dump_yaml(resource_quota(WALDUR_RESOURCE_QUOTA_NAME, args.namespace, hard, plan.names)), end="")
    for note in grant_notes(quota, plan, grants):
        print(f"note: {note}", file=sys.stderr)
    granted = [quota.grants[name].offering for name, count in grants.items() if count]
    for warning in unreachable_grants(plan, granted, args.namespace):
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    from themelio_gpu.render.schemas import schema_texts

    for path, text in schema_texts().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return EXIT_OK


# --- match / check / preflight -----------------------------------------------------------------------------


def _match(args: argparse.Namespace) -> int:
    from themelio_gpu.dryrun.cluster_match import match_command

    return match_command(_load(args), Path(args.slices), args.cluster, args.json)


def _trial(args: argparse.Namespace) -> int:
    from themelio_gpu.dryrun.trial import trial_command

    return trial_command(_load_catalog(args), Path(args.slices), args.offerings, args.json)


def _check(args: argparse.Namespace) -> int:
    from themelio_gpu.outputs.synth import synthesize
    from themelio_gpu.verify.drift import compare_folders, render_diff

    against = Path(args.against)
    if not against.is_dir():
        problems = Problems()
        what = "is not a folder" if against.exists() else "folder not found"
        problems.add(
            display_path(against), "", f"{what}: synthesize into it first (`{_resynthesize_command(args)}`)"
        )
        problems.raise_if_any()
    fleet = _load(args)
    with tempfile.TemporaryDirectory(prefix="themelio-check-") as tmp:
        synthesize(fleet, Path(tmp), progress=None)
        diff = compare_folders(against, Path(tmp))
    print(render_diff(diff, display_path(against), _resynthesize_command(args)))
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
        source = tf.provider_source()
        warning = source.warning()
        if warning is not None:
            print(f"warning: {warning}", file=sys.stderr)
        plural = "s" if len(stacks) != 1 else ""
        print(
            f"terraform-check: {len(stacks)} stack{plural} with {tf.terraform_version(terraform)}; providers from "
            f"{source.describe()}"
        )
        pinned = sorted({pin for folder in stacks.values() for pin in _provider_pins(folder)})
        if pinned:
            print(f"terraform-check: the stacks pin {', '.join(pinned)}")

        def report(result: tf.StackCheck) -> None:
            print(tf.render_result(result, plan=not args.no_plan, source=source), flush=True)

        results = tf.check_stacks(terraform, stacks, plan=not args.no_plan, jobs=args.jobs, on_result=report)
    print(tf.render_summary(results, plan=not args.no_plan, seconds=time.monotonic() - start))
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _provider_pins(folder: Path) -> list[str]:
    """The providers a stack folder's cdk.tf.json pins, as `source version`."""
    try:
        data = json.loads((folder / "cdk.tf.json").read_text(encoding="utf-8"))
        providers = data["terraform"]["required_providers"].values()
        return [f"{p['source']} {p['version']}" for p in providers]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


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


def _resynthesize_command(args: argparse.Namespace) -> str:
    """The `main.py` command that rewrites the checked folder from the same inputs."""
    words = [SYNTH_COMMAND]
    if args.catalog:
        words.append(f"--catalog {args.catalog}")
    if args.stacks_dir:
        words.append(f"--stacks-dir {args.stacks_dir}")
    if Path(args.against) != Path(DEFAULT_OUTDIR):
        words.append(f"--outdir {args.against}")
    return " ".join(words)


def _changed(args: argparse.Namespace) -> int:
    from themelio_gpu.changes.command import run_changed

    return run_changed(args, input_paths(args.catalog, args.stacks_dir))


def _pipeline(args: argparse.Namespace) -> int:
    from themelio_gpu.pipelines.command import run_pipeline

    return run_pipeline(args, input_paths(args.catalog, args.stacks_dir))


def _compare_engines(args: argparse.Namespace) -> int:
    from themelio_gpu.verify.engines import EngineSynthesisError, compare_engines

    paths = input_paths(args.catalog, args.stacks_dir)
    _load(args)  # bad input is reported once, before either engine runs
    try:
        return compare_engines(paths.catalog, paths.stacks_dir)
    except EngineSynthesisError as error:
        print(f"compare-engines: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _preflight(args: argparse.Namespace) -> int:
    from themelio_gpu.live.preflight import KubeconfigError, run_preflight

    plan = _select_cluster(_load(args), args.cluster)
    try:
        return run_preflight(plan, sys.stdout, kubeconfig=args.kubeconfig, context=args.context)
    except KubeconfigError as error:
        print(f"preflight: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


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
    from themelio_gpu.charts.helm import HelmMissingError
    from themelio_gpu.verify.charts import VerifyError
    from themelio_gpu.verify.command import verify_clusters

    fleet = _load(args)
    plans = [_select_cluster(fleet, args.cluster)] if args.cluster else list(fleet.clusters)
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
        return EXIT_OK if verify_clusters(plans, charts, sys.stdout, is_cache=not args.charts) else EXIT_FAILED
    except (VerifyError, HelmMissingError) as error:
        print(f"verify: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


# --- charts ------------------------------------------------------------------------------------------------


def _charts_fetch(args: argparse.Namespace) -> int:
    from themelio_gpu.charts.cache import fetch_charts, known_charts, pinned_charts
    from themelio_gpu.charts.helm import HelmMissingError, helm_binary
    from themelio_gpu.plan.helm.known_values import known_chart_versions

    source = Path(args.source) if args.source else None
    if source is not None and not source.is_dir():
        problems = Problems()
        problems.add("command line", f"--from {args.source}", "no such folder of chart folders")
        problems.raise_if_any()
    stacks_dir = input_paths(None, args.stacks_dir).stacks_dir
    refs = known_charts(dict(known_chart_versions())) if args.all_known else pinned_charts(stacks_dir)
    try:
        helm = None if source is not None else helm_binary("charts fetch pulls the charts with `helm pull`")
    except HelmMissingError as error:
        print(f"charts fetch: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK if fetch_charts(refs, chart_cache(args.cache), sys.stdout, helm, source) else EXIT_FAILED


def _charts_known_values(args: argparse.Namespace) -> int:
    from themelio_gpu.charts.cache import default_repository
    from themelio_gpu.charts.helm import ChartError, HelmMissingError, helm_binary
    from themelio_gpu.charts.values_table import chart_table_text, table_file

    try:
        default_repository(args.chart)  # a table only for a chart a cluster can install
    except ChartError as error:
        print(f"charts known-values: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    folder = Path(args.chart_dir) if args.chart_dir else chart_cache(args.cache) / f"{args.chart}-{args.version}"
    if not folder.is_dir():
        problems = Problems()
        fix = "" if args.chart_dir else ": fetch it first (`python -m themelio_gpu charts fetch`)"
        problems.add(display_path(folder), "", f"no such chart folder{fix}")
        problems.raise_if_any()
    try:
        text = chart_table_text(
            helm_binary("the table is read from `helm show values`"), args.chart, args.version, folder
        )
    except (HelmMissingError, ChartError) as error:
        print(f"charts known-values: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    target = table_file(args.chart, args.version)
    current = target.read_text(encoding="utf-8") if target.is_file() else None
    if args.check:
        if current != text:
            print(
                f"{display_path(target)} is not the table of {display_path(folder)}: run without --check",
                file=sys.stderr,
            )
            return EXIT_FAILED
        print(f"{display_path(target)} is the table of {display_path(folder)}")
        return EXIT_OK
    if current == text:
        print(f"{display_path(target)} is up to date")
    else:
        target.write_text(text, encoding="utf-8")
        print(
            f"wrote {display_path(target)}: commit it with the cluster files that pin {args.chart} {args.version}"
        )
    return EXIT_OK


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    details: str = "",
    *,
    exits: str,
) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does (`summary` also shows in the parent's command list) and,
    last, its own exit codes."""
    return commands.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}. {details}".strip(),
        epilog=exits if exits.startswith("exit codes") else f"exit codes: {exits}",
    )


def _group(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """A command of subcommands (`catalog validate`, `charts fetch`): each has its own exit codes."""
    group = _command(commands, name, summary, exits="each subcommand's --help gives its own")
    return group.add_subparsers(dest=f"{name}_command", required=True, metavar="SUBCOMMAND")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m themelio_gpu",
        description="Themelio GPU stacks: one GPU catalog turned into one Terraform stack per Kubernetes cluster. "
        "Every command reads the catalog and the cluster definitions (see --catalog and --stacks-dir).",
        epilog=EXIT_CODES,
    )
    _add_version_flag(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    synth = _command(commands, "synth", "synthesize every cluster (what main.py does)", exits=SYNTH_EXITS)
    _synth_parser(synth)
    synth.set_defaults(run=_synth)

    validate = _command(
        commands,
        "validate",
        "check the catalog and every cluster definition",
        "Writes nothing.",
        exits=f"0 the catalog and every cluster definition are valid, {BAD_INPUT}",
    )
    _add_input_flags(validate)
    validate.set_defaults(run=_validate)

    catalog = _group(commands, "catalog", "the GPU catalog: validate, show, export, quota")
    cv = _command(
        catalog, "validate", "check the catalog file alone", exits=f"0 the catalog is valid, {BAD_INPUT}"
    )
    _add_input_flags(cv)
    cv.set_defaults(run=_catalog_validate)
    cs = _command(
        catalog,
        "show",
        "table of offerings, products, MIG profiles, quota keys and serving clusters",
        exits=f"0 shown, {BAD_INPUT}",
    )
    _add_input_flags(cs)
    cs.set_defaults(run=_catalog_show)
    ce = _command(
        catalog,
        "export",
        "the Kubeflow and gpuLabel files, and per cluster the Waldur, quota, Kueue, Notebooks 2.0 and Polyaxon files",
        "Printed to stdout as one YAML stream unless --out is given.",
        exits="0 printed (or written with --out), 2 bad input or a folder that cannot be written",
    )
    _add_input_flags(ce)
    ce.add_argument("--out", "--outdir", metavar="DIR", help="write the files into DIR instead of printing them")
    ce.set_defaults(run=_catalog_export)
    cq = _command(
        catalog,
        "quota",
        "a namespace's ResourceQuota for one cluster: the grants, and 0 on every other GPU path",
        exits=f"0 printed, {BAD_INPUT}",
    )
    _add_input_flags(cq)
    cq.add_argument("--cluster", required=True, help="the cluster whose DeviceClasses the quota must close")
    cq.add_argument("--namespace", required=True, help="the namespace the quota is for (a DNS-1123 label)")
    cq.add_argument(
        "grants",
        nargs="*",
        metavar="OFFERING=COUNT",
        help="e.g. nvidia.com/a100=4; an alias name puts that part of the grant on the old name",
    )
    cq.set_defaults(run=_catalog_quota)

    schema = _command(
        commands,
        "schema",
        "rewrite the JSON Schemas of the catalog and cluster files",
        "Writes catalog/gpu-catalog.schema.json and stacks/cluster.schema.json.",
        exits="0 written, 2 a schema file cannot be written",
    )
    schema.set_defaults(run=_schema)

    match = _command(
        commands,
        "match",
        "which devices each offering's DeviceClass selects (offline dry run of the CEL selectors)",
        exits="0 every offering's class selects devices of these slices and none overlap, 1 a problem (an empty "
        "class of an offering whose devices are there, an overlap, a selector error), 2 bad input",
    )
    _add_input_flags(match)
    match.add_argument(
        "--slices", required=True, metavar="FILE", help="kubectl get resourceslices -o json (or -o yaml) output"
    )
    match.add_argument("--cluster", help="cluster whose classes to use (default: every offering in the catalog)")
    match.add_argument("--json", action="store_true", help="print the report as JSON")
    match.set_defaults(run=_match)

    trial = _command(
        commands,
        "trial",
        "two or more offerings side by side on ResourceSlices: which devices each could be given",
        "Reads the catalog alone (no cluster definition); exit 1 when the trial finds a problem.",
        exits=f"0 every device each offering selects meets its definition, 1 one does not or an offering selects "
        f"nothing, {BAD_INPUT}",
    )
    trial.add_argument(
        "--catalog", metavar="FILE", help=f"the GPU catalog (default: ${CATALOG_ENV} or catalog/gpu-catalog.yaml)"
    )
    trial.add_argument(
        "--slices", required=True, metavar="FILE", help="kubectl get resourceslices -o yaml (or -o json) output"
    )
    trial.add_argument("--json", action="store_true", help="print the report as JSON")
    trial.add_argument(
        "offerings", nargs="+", metavar="OFFERING", help="extended resource names, e.g. nvidia.com/h100"
    )
    trial.set_defaults(run=_trial)

    check = _command(
        commands,
        "check",
        "exit 1 when a synthesized folder differs from what the inputs synthesize",
        "Synthesizes into a temporary folder and prints the differences and what to run.",
        exits="0 the folder is what the inputs synthesize, 1 it differs (the differences are printed), 2 bad "
        "input or no such folder",
    )
    _add_input_flags(check)
    check.add_argument(
        "--against",
        default=DEFAULT_OUTDIR,
        metavar="DIR",
        help=f"the synthesized folder to check, e.g. what `npx cdktf synth` wrote (default: {DEFAULT_OUTDIR})",
    )
    check.set_defaults(run=_check)

    terraform = _command(
        commands,
        "terraform-check",
        "terraform init, validate and plan (backend removed) on every synthesized stack",
        "Providers come from wherever Terraform gets them: the registry, or a mirror named in TF_CLI_CONFIG_FILE.",
        exits="0 every stack passed, 1 a stack failed, 2 bad input or no terraform",
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

    compare = _command(
        commands,
        "compare-engines",
        "synthesize the fleet with cdktf and with CDK Terrain and show every difference that is not expected",
        "The expected ones (engine and provider versions, the namespace block's shape) are listed; "
        "docs/cdk-terrain.md says what each means for a deployed fleet.",
        exits="0 only the expected differences, 1 another difference (each is printed), 2 bad input or an "
        "engine that cannot synthesize the fleet",
    )
    _add_input_flags(compare)
    compare.set_defaults(run=_compare_engines)

    from themelio_gpu.changes import command as changed_command

    changed = _command(
        commands,
        "changed",
        "what a change does to each stack: added, changed, removed; per address create, update, replace, destroy",
        "Compares two synthesized folders (or a git commit's fleet with the current one), synthesizing only the "
        "stacks whose inputs differ, lists what would hurt a running cluster, and prints text, JSON or a GitHub "
        "Actions matrix (docs/changed.md).",
        exits="0 compared, 1 with --fail-on dangerous: a change would hurt a running cluster, 2 bad input (a "
        "folder or commit that cannot be read or synthesized), 130/143 interrupted (temporary files removed)",
    )
    _add_input_flags(changed)
    changed_command.add_arguments(changed)
    changed.set_defaults(run=_changed)

    from themelio_gpu.pipelines import command as pipeline_command

    engines = _command(
        commands,
        "pipeline",
        "write a pipeline engine's configuration for the fleet: GitHub Actions or Atlantis",
        exits="each subcommand's --help gives its own",
    ).add_subparsers(dest="engine", required=True, metavar="ENGINE")
    for engine_name, summary in (
        (
            "github-actions",
            "a workflow: synthesize, `changed`, then plan (pull requests) or apply per changed stack",
        ),
        ("atlantis", "atlantis.yaml: one project per stack folder, autoplanned when one of its inputs changes"),
    ):
        parser_of_engine = _command(
            engines,
            engine_name,
            summary,
            "Refuses to replace a file it did not write unless --force (docs/pipelines.md).",
            exits="0 written (or up to date), 1 with --check: the file differs from what the fleet needs, 2 bad "
            "input or a file this command did not write (without --force)",
        )
        pipeline_command.add_arguments(parser_of_engine, engine_name, _add_input_flags)
        parser_of_engine.set_defaults(run=_pipeline)

    preflight = _command(
        commands,
        "preflight",
        "read-only checks of a live cluster against its definition",
        "The kubeconfig is --kubeconfig, else $KUBECONFIG, else the definition's access.kubeconfig.path.",
        exits="0 every check passed, 1 a check failed or the cluster cannot be reached, 2 bad input or a "
        "kubeconfig that cannot be used (missing, not a kubeconfig, no such context)",
    )
    _add_input_flags(preflight)
    preflight.add_argument("cluster", help="the cluster's name (its definition's `name`)")
    preflight.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig to use (overrides $KUBECONFIG)")
    preflight.add_argument("--context", help="kubeconfig context to use (default: the definition's context)")
    preflight.set_defaults(run=_preflight)

    verify = _command(
        commands,
        "verify",
        "render the real charts with the stack's values and prove every operand's placement",
        "Needs helm on PATH (or $HELM); reports per cluster, pool and DaemonSet; exit 1 on any failure.",
        exits="0 every cluster proven, 1 a proof failed, 2 bad input, no chart cache, or no helm or "
        "kubernetes-validate",
    )
    _add_input_flags(verify)
    verify.add_argument("--cluster", help="only this cluster (default: every cluster)")
    verify.add_argument(
        "--charts",
        metavar="DIR",
        help=f"folder of chart directories named <chart>-<version> (default: the chart cache, ${CHART_CACHE_ENV} "
        f"or {DEFAULT_CHART_CACHE}, which `charts fetch` fills)",
    )
    verify.set_defaults(run=_verify)

    charts = _group(
        commands, "charts", "the Helm charts the clusters pin: fetch them, tabulate a new version's values keys"
    )
    cache_help = f"the chart cache (default: ${CHART_CACHE_ENV} or {DEFAULT_CHART_CACHE})"
    fetch = _command(
        charts,
        "fetch",
        "put the chart versions the clusters pin into the chart cache, for verify and charts known-values",
        "Pulls each with `helm pull --untar` from the repository its clusters name (NVIDIA's by default), or copies "
        "it from --from DIR; charts already in the cache are kept.",
        exits="0 every chart is in the cache, 1 a chart could not be fetched (what to do is printed), 2 bad "
        "input or no helm",
    )
    fetch.add_argument(
        "--stacks-dir",
        metavar="DIR",
        help=f"folder of cluster definitions whose pinned charts to fetch (default: ${STACKS_DIR_ENV} or stacks/)",
    )
    fetch.add_argument(
        "--all-known", action="store_true", help="every chart version with a known-values table, instead"
    )
    fetch.add_argument(
        "--from",
        dest="source",
        metavar="DIR",
        help="copy the charts from DIR (<chart>-<version> folders: the <chart>/ folder `helm pull --untar` makes, "
        "renamed) instead of pulling",
    )
    fetch.add_argument("--cache", metavar="DIR", help=cache_help)
    fetch.set_defaults(run=_charts_fetch)
    known = _command(
        charts,
        "known-values",
        "write the known-values table of a chart version from `helm show values` of the chart",
        "Writes themelio_gpu/plan/helm/tables/<chart>-<version>.json, the values keys validate accepts for that "
        "version; commit it.",
        exits="0 written or up to date, 1 with --check: the table differs, 2 no such chart folder (or another "
        "chart in it) or no helm",
    )
    known.add_argument("chart", help="the chart's name, e.g. gpu-operator")
    known.add_argument("version", help="its version as clusters pin it, e.g. v26.7.0")
    known.add_argument("--cache", metavar="DIR", help=cache_help)
    known.add_argument("--chart-dir", metavar="DIR", help="read the chart from DIR instead of the chart cache")
    known.add_argument("--check", action="store_true", help="write nothing; exit 1 when the table differs")
    known.set_defaults(run=_charts_known_values)
    sandbox_command.register(commands)
    return parser


def main(argv: Sequence[str]) -> int:
    interrupts.install()
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return report_input_errors(lambda: run(args))
