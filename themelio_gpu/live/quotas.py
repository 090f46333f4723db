"""The live ResourceQuotas: every namespace whose quotas hold a GPU key must limit every way to a GPU (the
plan's paths, see plan/quota.py, and live DeviceClasses the plan does not know).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.k8s.nvidia import DRA_DRIVER
from themelio_gpu.k8s.quota import devices_key
from themelio_gpu.live.api import RESOURCE_QUOTAS, Api
from themelio_gpu.live.device_classes import LiveClass
from themelio_gpu.live.report import Report
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.quota import ClusterQuotaPlan, QuotaPath, mig_devices, plan_quota, whole_gpus
from themelio_gpu.words import count

# Reads which driver a live selector pins by its text, not by evaluating it: the CEL evaluator
# (dryrun/cel_kubernetes.py) decides a selector on a device, and no device stands for "any GPU" (a
# selector using has() is false on an attribute-less one). When unsure, a class is taken to reach GPUs.
_DRIVER_TEST = re.compile(r"^\s*device\.driver\s*==\s*'([^']+)'\s*(&&|$)")


def _selects_gpus(cls: LiveClass) -> bool:
    """False only for a class whose selectors pin another driver (compute-domain channels and daemons)."""
    for selector in cls.selectors:
        match = _DRIVER_TEST.match(selector)
        if match and match.group(1) != DRA_DRIVER:
            return False
    return True


def quota_paths(
    quota: ClusterQuotaPlan, live: Sequence[LiveClass], products: Mapping[str, GpuProduct]
) -> list[tuple[QuotaPath, str]]:
    """Every GPU path with the key that closes it: the plan's, and live classes the plan does not know (taken
    to reach any device of the cluster's `products`: their selectors are not the plan's to read)."""
    anything = whole_gpus(products) | mig_devices(products)
    paths = [(p, quota.key_for(p)) for p in quota.paths]
    known = {p.name for p in quota.paths if not p.device_plugin} | {p.name for p in quota.not_gpu}
    for cls in live:
        if cls.name not in known and _selects_gpus(cls):
            path = QuotaPath(cls.name, False, cls.extended_resource_name, anything, "live")
            paths.append((path, devices_key(cls.name)))  # its own counter closes it alone
    return paths


def check_resource_quotas(plan: ClusterPlan, live: Sequence[LiveClass], api: Api, report: Report) -> None:
    """Every namespace whose quotas have a GPU key must limit every way to a GPU (see plan/quota.py)."""
    quota = plan_quota(plan)
    paths = quota_paths(quota, live, plan.products)
    gpu_keys = {k for path, _ in paths for k in path.charged_keys}
    limited: dict[str, set[str]] = defaultdict(set)
    scoped: dict[str, list[str]] = defaultdict(list)
    for item in api.list_items(RESOURCE_QUOTAS):
        metadata = item.get("metadata") or {}
        spec = item.get("spec") or {}
        namespace = str(metadata.get("namespace", ""))
        keys = set(spec.get("hard") or {})
        if spec.get("scopes") or spec.get("scopeSelector"):
            # A scoped quota counts only the pods in its scope, and never a ResourceClaim.
            if keys & gpu_keys:
                scoped[namespace].append(str(metadata.get("name", "")))
            limited.setdefault(namespace, set())
            continue
        limited[namespace] |= keys
    checked = sorted(ns for ns, keys in limited.items() if keys & gpu_keys or ns in scoped)
    others = sorted(set(limited) - set(checked))
    for namespace in checked:
        for name in scoped.get(namespace, []):
            report.warn(
                f"quota {namespace}",
                f"ResourceQuota {name} has scopes: its GPU keys count only the pods in its scope and never a "
                "ResourceClaim, so they are not counted as limits here",
            )
    holes = 0
    for namespace in checked:
        for path, key in paths:
            if not set(path.charged_keys) & limited[namespace]:
                holes += 1
                value = "its grant, or 0" if key in quota.name_keys else "0"
                report.fail(f"quota {namespace}", f"{path.label} is not limited: add {key} ({value})")
    without = (
        f"; {len(others)} with quotas but no GPU key ({', '.join(others)}): every GPU is open to them"
        if others
        else ""
    )
    if not checked:
        report.warn(
            "resource-quotas",
            "no namespace has a GPU quota key: every namespace can take every GPU "
            f"(python -m themelio_gpu catalog quota --cluster {plan.name} --namespace NS ...){without}",
        )
    elif not holes:
        report.ok(
            "resource-quotas",
            f"{count(len(checked), 'namespace')} with GPU keys ({', '.join(checked)}) limit all {count(len(paths), 'way')} to a "
            f"GPU{without}",
        )
