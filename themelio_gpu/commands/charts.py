"""`charts fetch|known-values`: the Helm charts the clusters pin, fetched; a new version's values keys tabulated."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_catalog_flag, add_command, add_group
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.settings import CHART_CACHE_ENV, DEFAULT_CHART_CACHE, STACKS_DIR_ENV, chart_cache, input_paths


def register(commands: Commands) -> None:
    charts = add_group(
        commands, "charts", "the Helm charts the clusters pin: fetch them, tabulate a new version's values keys"
    )
    cache_help = f"the chart cache (default: ${CHART_CACHE_ENV} or {DEFAULT_CHART_CACHE})"
    fetch = add_command(
        charts,
        "fetch",
        "put the chart versions the clusters pin into the chart cache, for verify and charts known-values",
        "Pulls each with `helm pull --untar` from the repository its clusters name (the catalog's charts.mirror, "
        "else NVIDIA's, by default), or copies it from --from DIR; a chart from a local chart folder is unpacked "
        "from its archive there; charts already in the cache are kept.",
        exits="0 every chart is in the cache, 1 a chart could not be fetched (what to do is printed), 2 bad "
        "input or no helm",
    )
    add_catalog_flag(fetch)
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
    fetch.set_defaults(run=run_fetch)
    known = add_command(
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
    known.set_defaults(run=run_known_values)


def run_fetch(args: argparse.Namespace) -> int:
    from themelio_gpu.charts.cache import fetch_charts, known_charts, pinned_charts
    from themelio_gpu.charts.helm import HelmMissingError, helm_binary
    from themelio_gpu.inputs.catalog.loading import catalog_chart_mirror
    from themelio_gpu.inputs.chart_sources import project_root
    from themelio_gpu.plan.helm.known_values import known_chart_versions

    source = Path(args.source) if args.source else None
    if source is not None and not source.is_dir():
        problems = Problems()
        problems.add("command line", f"--from {args.source}", "no such folder of chart folders")
        problems.raise_if_any()
    paths = input_paths(args.catalog, args.stacks_dir)
    mirror = catalog_chart_mirror(paths.catalog)
    root = project_root(paths.catalog)
    refs = (
        known_charts(dict(known_chart_versions()), mirror, root)
        if args.all_known
        else pinned_charts(paths.stacks_dir, mirror, root)
    )
    pulled = source is None and any(not ref.local for ref in refs)
    try:
        helm = helm_binary("charts fetch pulls the charts with `helm pull`") if pulled else None
    except HelmMissingError as error:
        print(f"charts fetch: {error}", file=sys.stderr)
        return exits.BAD_INPUT
    return exits.OK if fetch_charts(refs, chart_cache(args.cache), sys.stdout, helm, source) else exits.FAILED


def run_known_values(args: argparse.Namespace) -> int:
    from themelio_gpu.charts.cache import default_repository
    from themelio_gpu.charts.helm import ChartError, HelmMissingError, helm_binary
    from themelio_gpu.charts.values_table import chart_table_text, table_file

    try:
        default_repository(args.chart)  # a table only for a chart a cluster can install
    except ChartError as error:
        print(f"charts known-values: {error}", file=sys.stderr)
        return exits.BAD_INPUT
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
        return exits.BAD_INPUT
    target = table_file(args.chart, args.version)
    current = target.read_text(encoding="utf-8") if target.is_file() else None
    if args.check:
        if current != text:
            print(
                f"{display_path(target)} is not the table of {display_path(folder)}: run without --check",
                file=sys.stderr,
            )
            return exits.FAILED
        print(f"{display_path(target)} is the table of {display_path(folder)}")
        return exits.OK
    if current == text:
        print(f"{display_path(target)} is up to date")
    else:
        target.write_text(text, encoding="utf-8")
        print(
            f"wrote {display_path(target)}: commit it with the cluster files that pin {args.chart} {args.version}"
        )
    return exits.OK
