"""`catalog validate|show|export|quota`: the GPU catalog alone, as tables, as consumer files, as a quota."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.commands.base import (
    BAD_INPUT,
    Commands,
    add_command,
    add_group,
    add_input_flags,
    load,
    load_catalog_only,
)
from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.tables import table
from themelio_gpu.words import count


def register(commands: Commands) -> None:
    catalog = add_group(commands, "catalog", "the GPU catalog: validate, show, export, quota")
    validate = add_command(
        catalog, "validate", "check the catalog file alone", exits=f"0 the catalog is valid, {BAD_INPUT}"
    )
    add_input_flags(validate)
    validate.set_defaults(run=run_validate)
    show = add_command(
        catalog,
        "show",
        "table of offerings, products, MIG profiles, quota keys and serving clusters",
        exits=f"0 shown, {BAD_INPUT}",
    )
    add_input_flags(show)
    show.set_defaults(run=run_show)
    export = add_command(
        catalog,
        "export",
        "the Kubeflow and gpuLabel files, and per cluster the Waldur, quota, Kueue, Notebooks 2.0 and Polyaxon files",
        "Printed to stdout as one YAML stream unless --out is given.",
        exits="0 printed (or written with --out), 2 bad input or a folder that cannot be written",
    )
    add_input_flags(export)
    export.add_argument(
        "--out", "--outdir", metavar="DIR", help="write the files into DIR instead of printing them"
    )
    export.set_defaults(run=run_export)
    quota = add_command(
        catalog,
        "quota",
        "a namespace's ResourceQuota for one cluster: the grants, and 0 on every other GPU path",
        "Checked against the real API server's quota admission and scheduler by `sandbox probe`, path by path "
        "(docs/sandbox.md).",
        exits=f"0 printed, {BAD_INPUT}",
    )
    add_input_flags(quota)
    quota.add_argument("--cluster", required=True, help="the cluster whose DeviceClasses the quota must close")
    quota.add_argument("--namespace", required=True, help="the namespace the quota is for (a DNS-1123 label)")
    quota.add_argument(
        "grants",
        nargs="*",
        metavar="OFFERING=COUNT",
        help="e.g. nvidia.com/a100=4; an alias name puts that part of the grant on the old name",
    )
    quota.set_defaults(run=run_quota)


def run_validate(args: argparse.Namespace) -> int:
    catalog = load_catalog_only(args)
    print(f"OK: {catalog.file}: {count(len(catalog.offerings), 'offering')}")
    return exits.OK


def run_show(args: argparse.Namespace) -> int:
    fleet = load(args)
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
    print(table(rows, rule=True))
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
    print(table(products, rule=True))
    return exits.OK


def _product_column(offering: ResolvedOffering) -> str:
    if offering.capability is not None:
        return offering.capability.describe()
    return offering.product.key if offering.product else "any"


def run_export(args: argparse.Namespace) -> int:
    from themelio_gpu.outputs.consumer_files import export_files

    fleet = load(args)
    files = export_files(fleet)  # everything computed before anything is written
    if args.out is None:
        # Nothing is written unless asked: the files go to stdout as one YAML stream, one document each.
        for name, text in files.items():
            print(f"--- # {name}")
            print(text, end="")
        return exits.OK
    out = Path(args.out)
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {display_path(path)}")
    return exits.OK


def check_namespace(namespace: str, problems: Problems, flag: str = "--namespace") -> None:
    """A namespace given on the command line must be a valid Namespace name (a DNS-1123 label)."""
    for message in k8s_names.dns1123_label(namespace):
        problems.add("command line", f"{flag} {namespace}", f"not a valid namespace: {message}")


def run_quota(args: argparse.Namespace) -> int:
    from themelio_gpu.plan.quota import grant_notes, parse_grants, plan_quota, requested_grants
    from themelio_gpu.plan.selection import select_cluster
    from themelio_gpu.render.contracts import WALDUR_RESOURCE_QUOTA_NAME, resource_quota, unreachable_grants
    from themelio_gpu.render.yaml_output import dump_yaml

    fleet = load(args)
    problems = Problems()
    check_namespace(args.namespace, problems)
    requested = parse_grants(args.grants, problems)
    plan = select_cluster(fleet, args.cluster, f"--cluster {args.cluster}", problems)
    quota = plan_quota(plan)
    grants = requested_grants(quota, plan, requested, problems)
    problems.raise_if_any()
    hard = quota.hard(grants)
    print(dump_yaml(resource_quota(WALDUR_RESOURCE_QUOTA_NAME, args.namespace, hard, plan.names)), end="")
    for note in grant_notes(quota, plan, grants):
        print(f"note: {note}", file=sys.stderr)
    granted = [quota.grants[name].offering for name, count in grants.items() if count]
    for warning in unreachable_grants(plan, granted, args.namespace):
        print(f"warning: {warning}", file=sys.stderr)
    return exits.OK
