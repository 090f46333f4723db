"""Command-line entry points. Bad input ends in a list of `file: location: message` lines, never a traceback.

Exit codes: 0 success, 1 a check found a problem (drift, preflight, match), 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from themelio_gpu.inputs.catalog.catalog import Catalog, load_catalog
from themelio_gpu.inputs.catalog.products import PRODUCTS
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.contracts import (
    gpu_labels_config,
    kubeflow_spawner_gpus,
    resource_quota,
    waldur_backend_components,
    waldur_quota_mapping,
)
from themelio_gpu.outputs.yaml_output import dump_yaml
from themelio_gpu.plan.fleet import Fleet, load_fleet
from themelio_gpu.settings import CATALOG_ENV, DEFAULT_OUTDIR, STACKS_DIR_ENV, input_paths

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
    "waldur-quota-mapping.yaml": waldur_quota_mapping,
    "waldur-backend-components.yaml": waldur_backend_components,
    "kubeflow-spawner-gpus.yaml": kubeflow_spawner_gpus,
    "gpu-labels.yaml": gpu_labels_config,
}


def contract_files(catalog: Catalog) -> dict[str, str]:
    return {name: dump_yaml(make(catalog)) for name, make in CONTRACT_FILES.items()}


def _catalog_export(args: argparse.Namespace) -> int:
    catalog = _load_catalog(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in contract_files(catalog).items():
        (out / name).write_text(text, encoding="utf-8")
        print(f"wrote {display_path(out / name)}")
    return EXIT_OK


def _catalog_quota(args: argparse.Namespace) -> int:
    catalog = _load_catalog(args)
    problems = Problems()
    limits: dict[str, int] = {}
    for item in args.limits:
        name, _, count = item.partition("=")
        if catalog.find(name) is None:
            problems.add("command line", item, f"{name} is not in the catalog")
        elif not count.isdigit():
            problems.add("command line", item, "write NAME=COUNT with a whole number")
        else:
            limits[name] = int(count)
    problems.raise_if_any()
    print(dump_yaml(resource_quota(args.namespace, limits)), end="")
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

    against = Path(args.against)
    if not against.is_dir():
        problems = Problems()
        what = "is not a folder" if against.exists() else "folder not found"
        problems.add(
            display_path(against),
            "",
            f"{what}: synthesize into it first (`python main.py --outdir {args.against}`)",
        )
        problems.raise_if_any()
    fleet = _load(args)
    with tempfile.TemporaryDirectory(prefix="themelio-check-") as tmp:
        synthesize(fleet, Path(tmp), progress=None)
        diff = compare_folders(against, Path(tmp))
    print(render_diff(diff, display_path(against), _resynthesize_command(args)))
    return EXIT_OK if diff.identical else EXIT_FAILED


def _resynthesize_command(args: argparse.Namespace) -> str:
    """The `main.py` command that rewrites the checked folder from the same inputs."""
    words = ["python main.py"]
    if args.catalog:
        words.append(f"--catalog {args.catalog}")
    if args.stacks_dir:
        words.append(f"--stacks-dir {args.stacks_dir}")
    if Path(args.against) != Path(DEFAULT_OUTDIR):
        words.append(f"--outdir {args.against}")
    return " ".join(words)


def _preflight(args: argparse.Namespace) -> int:
    from themelio_gpu.live.preflight import run_preflight

    fleet = _load(args)
    plan = fleet.cluster(args.cluster)
    if plan is None:
        problems = Problems()
        known = ", ".join(c.name for c in fleet.clusters)
        problems.add("command line", args.cluster, f"no cluster of that name; known: {known}")
        problems.raise_if_any()
    assert plan is not None
    return run_preflight(plan, sys.stdout, kubeconfig=args.kubeconfig, context=args.context)


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
    ce = catalog.add_parser("export", help="write the Waldur, Kubeflow and gpuLabel files")
    _add_input_flags(ce)
    ce.add_argument("--out", default="catalog/generated", help="folder to write (default: catalog/generated)")
    ce.set_defaults(run=_catalog_export)
    cq = catalog.add_parser("quota", help="a ResourceQuota named the way Waldur names it")
    _add_input_flags(cq)
    cq.add_argument("--namespace", required=True)
    cq.add_argument("limits", nargs="+", metavar="NAME=COUNT", help="e.g. nvidia.com/a100=4")
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
    check.add_argument(
        "--against", default=DEFAULT_OUTDIR, help=f"committed synthesized output (default: {DEFAULT_OUTDIR})"
    )
    check.set_defaults(run=_check)

    preflight = commands.add_parser("preflight", help="read-only checks of a live cluster against its definition")
    _add_input_flags(preflight)
    preflight.add_argument("cluster")
    preflight.add_argument("--kubeconfig", help="override the definition's kubeconfig path")
    preflight.add_argument("--context", help="override the definition's kubeconfig context")
    preflight.set_defaults(run=_preflight)
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return report_input_errors(lambda: run(args))
