"""`preflight <cluster>`: read-only checks of a live cluster against its cluster definition.

Each check prints one line, `OK   <check>: <detail>`, `WARN ...` or `FAIL ...`, then a summary line; the
exit code is 1 when any check fails. Nothing is written to the cluster: every request is a GET, except one
server-side dry-run create (`dryRun=All`) that proves the DRAExtendedResource gate is on in kube-apiserver.

This module runs the checks in order, each from its own module of this package (api.py the transport,
kubeconfig.py the client, report.py the lines); an API error fails one check, an unreachable server all.
The package must stay free of cdktf and the provider bindings: they take seconds to load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO, TypeVar

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from themelio_gpu import exits
from themelio_gpu.live.api import Api, ClusterConnectionError, api_error
from themelio_gpu.live.cluster_policy import check_no_cluster_policy
from themelio_gpu.live.device_classes import LiveClass, check_device_classes
from themelio_gpu.live.device_plugin import check_device_plugin_overlap
from themelio_gpu.live.gate import check_gate
from themelio_gpu.live.kubeconfig import client_log, connect
from themelio_gpu.live.pools import check_pool
from themelio_gpu.live.quotas import check_resource_quotas
from themelio_gpu.live.report import Report
from themelio_gpu.live.resource_slices import check_resource_slices
from themelio_gpu.live.server_version import check_version
from themelio_gpu.plan.model import ClusterPlan

EXIT_OK = exits.OK
EXIT_FAILED = exits.FAILED

T = TypeVar("T")


def run_preflight(
    plan: ClusterPlan,
    out: TextIO,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    api_client: k8s_client.ApiClient | None = None,
) -> int:
    """Check the live cluster against `plan`; 0 when every check passes, 1 when any fails."""
    report = Report(out)
    owned = api_client is None
    logged: list[str] = []
    try:
        if api_client is None:
            api_client, logged = connect(plan.definition, kubeconfig, context)
        api = Api(api_client)
        _run_checks(plan, api, report)
    except ClusterConnectionError as error:
        # A failed exec plugin is only logged by the client; it usually explains a 401 or a refusal.
        report.fail("connection", f"{error}{client_log(logged)}")
    finally:
        if owned and api_client is not None:
            api_client.close()
    report.summary(plan.name)
    return EXIT_FAILED if report.failed else EXIT_OK


def _run_checks(plan: ClusterPlan, api: Api, report: Report) -> None:
    try:
        version = api.get("/version")
    except ApiException as error:
        # 401/403 on /version is a credentials problem, not a check result.
        raise ClusterConnectionError(f"{api.host}: {api_error(error)}") from error
    report.ok("connection", api.host)
    check_version(plan, version, report)
    if plan.definition.dra_by_gpu_operator:
        _guarded(report, "cluster-policy", check_no_cluster_policy, plan, api, report)

    classes: tuple[LiveClass, ...] | None = None
    if not plan.dra_enabled:
        report.ok("dra", "no pool uses DRA: the gate, DeviceClass and ResourceSlice checks do not apply")
    elif check_gate(plan.definition, api, report):
        classes = _guarded(report, "device-classes", check_device_classes, plan, api, report)
        if classes is not None:
            _guarded(report, "device-plugin", check_device_plugin_overlap, plan, classes, api, report)
        _guarded(report, "resource-slices", check_resource_slices, plan, api, report)
    _guarded(report, "resource-quotas", check_resource_quotas, plan, classes or (), api, report)
    for pool in plan.pools:
        _guarded(report, f"pool {pool.name}", check_pool, plan, pool, api, report)


def _guarded(report: Report, check: str, run: Callable[..., T], *args: Any) -> T | None:
    """Run one check; an API error (RBAC, a missing API) fails that check only. Unreachable aborts all."""
    try:
        return run(*args)
    except ApiException as error:
        report.fail(check, f"could not read from the cluster: {api_error(error)}")
        return None


__all__ = ["EXIT_FAILED", "EXIT_OK", "run_preflight"]
