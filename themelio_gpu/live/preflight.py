"""`preflight <cluster>`: read-only checks of a live cluster against its cluster definition.

Each check prints one line, `OK   <check>: <detail>`, `WARN ...` or `FAIL ...`, then a summary line; the
exit code is 1 when any check fails. Nothing is written to the cluster: every request is a GET, except one
server-side dry-run create (`dryRun=All`) that proves the DRAExtendedResource gate is on in kube-apiserver.

This module must stay free of cdktf and the provider bindings: they take seconds to load.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from themelio_gpu import exits
from themelio_gpu.dryrun.cluster_match import match_cluster
from themelio_gpu.dryrun.match import MatchReport
from themelio_gpu.dryrun.resourceslices import Device, ResourceSliceError, parse_resourceslices
from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.inputs.clusters.definition import ClusterDefinition, Component
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.dra import serving_class
from themelio_gpu.k8s.nvidia import (
    DEPLOY_DEVICE_PLUGIN,
    DRA_DRIVER,
    DRA_KUBELET_PLUGIN,
    GPU_CLASS,
    GPU_CLUSTER_MIN_KUBERNETES,
    gpu_cluster_supports,
)
from themelio_gpu.k8s.quota import devices_key
from themelio_gpu.k8s.semver import Semver
from themelio_gpu.k8s.version import parse_kubernetes_version
from themelio_gpu.plan import dra_mode
from themelio_gpu.plan.model import ClusterPlan, DeviceClassSpec
from themelio_gpu.plan.quota import (
    ClusterQuotaPlan,
    QuotaPath,
    mig_devices,
    plan_quota,
    whole_gpus,
)
from themelio_gpu.words import count

EXIT_OK = exits.OK
EXIT_FAILED = exits.FAILED

RESOURCE_API = "/apis/resource.k8s.io/v1"
DEVICE_CLASSES = f"{RESOURCE_API}/deviceclasses"
RESOURCE_SLICES = f"{RESOURCE_API}/resourceslices"
NODES = "/api/v1/nodes"
CLUSTER_POLICIES = "/apis/nvidia.com/v1/clusterpolicies"
RESOURCE_QUOTAS = "/api/v1/resourcequotas"
PROBE_NAME_PREFIX = "themelio-preflight-probe-"
PROBE_RESOURCE_NAME = "preflight.themelio.io/probe"

# (connect, read) seconds: a preflight must not hang on an unreachable or overloaded API server.
REQUEST_TIMEOUT = (10, 60)
PAGE_SIZE = 500

Status = Literal["OK", "WARN", "FAIL"]
T = TypeVar("T")


class ClusterConnectionError(Exception):
    """The cluster cannot be reached or the client cannot be configured; the message says why."""


class KubeconfigError(Exception):
    """The kubeconfig cannot be used (not found, not YAML, not a kubeconfig, no such context): bad input, exit 2."""


# --- Output ----------------------------------------------------------------------------------------------


class Report:
    """Prints each result as it comes, so a slow request shows where it waits, and counts them."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.counts: dict[Status, int] = {"OK": 0, "WARN": 0, "FAIL": 0}

    def line(self, status: Status, check: str, detail: str) -> None:
        self.counts[status] += 1
        print(f"{status:<4} {check}: {detail}", file=self.out, flush=True)

    def ok(self, check: str, detail: str) -> None:
        self.line("OK", check, detail)

    def warn(self, check: str, detail: str) -> None:
        self.line("WARN", check, detail)

    def fail(self, check: str, detail: str) -> None:
        self.line("FAIL", check, detail)

    @property
    def failed(self) -> bool:
        return self.counts["FAIL"] > 0

    def summary(self, cluster: str) -> None:
        verdict = f"cluster {cluster} is NOT ready" if self.failed else f"cluster {cluster} passed"
        counts = ", ".join(f"{n} {s}" for s, n in self.counts.items())
        print(f"Summary: {counts}: {verdict}", file=self.out, flush=True)


# --- Connection ------------------------------------------------------------------------------------------


class _LogCapture(logging.Handler):
    """The kubernetes client logs exec-plugin failures instead of raising; keep them for the FAIL line."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _capture_client_errors() -> Iterator[_LogCapture]:
    capture = _LogCapture()
    root = logging.getLogger()
    root.addHandler(capture)
    try:
        yield capture
    finally:
        root.removeHandler(capture)


def api_kubeconfig(definition: ClusterDefinition) -> dict[str, Any]:
    """An in-memory kubeconfig for `access.api`: the host, its CA and the exec credential plugin."""
    api = definition.access.api
    if api is None:
        raise ValueError(f"cluster {definition.name} has no access.api")
    exec_config: dict[str, Any] = {
        "apiVersion": api.exec.api_version,
        "command": api.exec.command,
        "args": list(api.exec.args),
        "interactiveMode": "Never",
    }
    if api.exec.env:
        exec_config["env"] = [{"name": k, "value": v} for k, v in api.exec.env.items()]
    name = definition.name
    ca = base64.b64encode(api.cluster_ca_certificate.encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": api.host, "certificate-authority-data": ca}}],
        "users": [{"name": name, "user": {"exec": exec_config}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def connect(
    definition: ClusterDefinition, kubeconfig: str | None = None, context: str | None = None
) -> tuple[k8s_client.ApiClient, list[str]]:
    """A client for the cluster and any errors the client logged while loading credentials.

    The kubeconfig is `kubeconfig`, else $KUBECONFIG (a list of files, as kubectl reads it), else the
    definition's path; the context is `context`, else the definition's. With `access.api` (and neither
    override) the kubeconfig is built in memory around the exec plugin.
    """
    configuration = k8s_client.Configuration()
    # One retry: the default three make an unreachable server take four connect timeouts to report.
    configuration.retries = 1
    access = definition.access.kubeconfig
    from_env = os.environ.get("KUBECONFIG") or None
    with _capture_client_errors() as capture:
        try:
            if kubeconfig is not None or context is not None or access is not None:
                path, source = _kubeconfig_files(kubeconfig, from_env, access.path if access else None)
                wanted = context or (access.context if access else None)
                _check_context(path, source, wanted, given=context is not None)
                try:
                    client = kube_config.new_client_from_config(
                        config_file=path,
                        context=wanted,
                        persist_config=False,  # never rewrite the user's kubeconfig
                        client_configuration=configuration,
                    )
                except (ConfigException, TypeError, AttributeError, KeyError, ValueError) as error:
                    raise KubeconfigError(
                        f"kubeconfig {source} cannot be used: {error}{_logged(capture.messages)}"
                    ) from error
            else:
                client = kube_config.new_client_from_config_dict(
                    api_kubeconfig(definition), persist_config=False, client_configuration=configuration
                )
        except ConfigException as error:
            raise ClusterConnectionError(f"{error}{_logged(capture.messages)}") from error
    return client, capture.messages


def _kubeconfig_files(flag: str | None, from_env: str | None, definition: str | None) -> tuple[str | None, str]:
    """The kubeconfig files to load (os.pathsep-separated, `~` expanded) and how messages name them."""
    given = flag or from_env or definition
    if given is None:
        return None, "~/.kube/config"
    files = os.pathsep.join(str(Path(f).expanduser()) for f in given.split(os.pathsep) if f)
    shown = files + (" (from $KUBECONFIG)" if flag is None and from_env else "")
    if not any(Path(f).is_file() for f in files.split(os.pathsep)):
        raise KubeconfigError(f"kubeconfig {shown} not found")
    return files, shown


def _check_context(files: str | None, shown: str, wanted: str | None, *, given: bool) -> None:
    """KubeconfigError unless the kubeconfig files read as kubeconfigs holding the context `wanted` (None: the
    current one): said in our words before the client says it in its own."""
    names: list[str] = []
    current = None
    for file in (f for f in (files or "").split(os.pathsep) if f and Path(f).is_file()):
        try:
            data = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as error:
            reason = _yaml_reason(error) if isinstance(error, yaml.YAMLError) else "not UTF-8 text"
            raise KubeconfigError(f"kubeconfig {shown} is not valid YAML: {reason}") from None
        if data is None:
            raise KubeconfigError(f"kubeconfig {shown}: the config file is empty")
        if not isinstance(data, dict) or not isinstance(data.get("contexts") or [], list):
            raise KubeconfigError(
                f"kubeconfig {shown} is not a kubeconfig (a mapping with clusters, users and contexts)"
            )
        names += [str(c.get("name")) for c in data.get("contexts") or [] if isinstance(c, dict)]
        current = current or data.get("current-context")
    wanted = wanted or current
    if wanted is None:
        raise KubeconfigError(f"kubeconfig {shown} has no current-context: name one with --context")
    if wanted not in names:
        where = (
            "--context" if given else "access.kubeconfig.context of the cluster's definition (or pass --context)"
        )
        known = ", ".join(names) or "none"
        raise KubeconfigError(f"kubeconfig {shown} has no context {wanted!r} (its contexts: {known}); fix {where}")


def _yaml_reason(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else problem


def _logged(messages: Sequence[str]) -> str:
    return f" (client: {'; '.join(messages)})" if messages else ""


class Api:
    """Raw JSON requests: plain dicts keep the checks close to what `kubectl get --raw` shows."""

    def __init__(self, client: k8s_client.ApiClient) -> None:
        self.client = client

    @property
    def host(self) -> str:
        return str(self.client.configuration.host)

    def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        # The client's own request path (auth settings, TLS, retries, timeouts) without its model
        # deserialization: with `_preload_content=False` it returns the urllib3 response as it came, and raises
        # ApiException (its body decoded) for any status outside 200-299. kubernetes 36's generated client.
        try:
            response = self.client.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=dict(body) if body is not None else None,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ClusterConnectionError(f"cannot reach {self.host}: {_network_reason(error)}") from error
        try:
            data = json.loads(response.data or b"{}")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ClusterConnectionError(
                f"{path} did not return a JSON object; is {self.host} a Kubernetes API server?"
            )
        return data

    def get(self, path: str, query: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
        return self.request("GET", path, query)

    def list_items(self, path: str, query: Sequence[tuple[str, str]] = ()) -> list[dict[str, Any]]:
        """Every item of a list, following `continue` tokens so large clusters are read in pages."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            page = [*query, ("limit", str(PAGE_SIZE))] + ([("continue", token)] if token else [])
            data = self.get(path, page)
            items.extend(data.get("items") or [])
            token = (data.get("metadata") or {}).get("continue") or ""
            if not token:
                return items


_CONNECTION_REPR = re.compile(r"^(<[^>]*>|\w+\([^)]*\)): ")


def _network_reason(error: Exception) -> str:
    reason = getattr(error, "reason", None) or error
    # urllib3 prefixes the connection object's repr; the OS error after it is what a user needs.
    return _CONNECTION_REPR.sub("", str(reason))


def api_error(error: ApiException) -> str:
    """`HTTP 403 Forbidden: <the server's Status message>`."""
    message = ""
    if error.body:
        try:
            body = json.loads(error.body)
            message = body.get("message", "") if isinstance(body, dict) else ""
        except ValueError:
            message = str(error.body)[:200]
    text = f"HTTP {error.status} {error.reason or ''}".rstrip()
    return f"{text}: {message}" if message else text


# --- The checks ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveClass:
    name: str
    extended_resource_name: str | None
    selectors: tuple[str, ...]
    created: str


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
        report.fail("connection", f"{error}{_logged(logged)}")
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


# 1. Server version ----------------------------------------------------------------------------------------


def check_version(plan: ClusterPlan, version: Mapping[str, Any], report: Report) -> None:
    definition = plan.definition
    git_version = str(version.get("gitVersion", ""))
    parsed = parse_kubernetes_version(git_version)
    if parsed is None:
        # Some distributions report only major/minor (minor may read "34+").
        parsed = parse_kubernetes_version(f"{version.get('major', '')}.{version.get('minor', '')}")
    if parsed is None:
        report.fail("server-version", f"cannot parse the server version {version!r}")
        return
    served = (parsed.major, parsed.minor, parsed.patch)
    declared = (definition.version.major, definition.version.minor, definition.version.patch)
    shown = git_version or ".".join(str(x) for x in served if x is not None)
    too_old = parsed.release == GPU_CLUSTER_MIN_KUBERNETES.release and gpu_cluster_supports(parsed) is False
    if definition.dra_by_gpu_operator and too_old:
        report.fail(
            "server-version",
            f"the server runs {shown}; the GPU Operator's GPUCluster (draDriver.managedBy: gpu-operator) needs "
            "1.34.2 or later. Upgrade the control plane",
        )
    elif served[:2] != declared[:2]:
        report.fail(
            "server-version",
            f"the server runs {shown}, the definition declares kubernetesVersion {definition.kubernetes_version}: "
            f"major.minor must match (feature gates and API versions follow it). Update kubernetesVersion in "
            f"{plan.file}, or bring the cluster to {definition.kubernetes_version}",
        )
    elif declared[2] is not None and served[2] is not None and served[2] < declared[2]:
        report.warn(
            "server-version",
            f"the server runs {shown}, older than the declared {definition.kubernetes_version} (patch release)",
        )
    else:
        report.ok("server-version", f"{shown} (declared {definition.kubernetes_version})")


def check_no_cluster_policy(plan: ClusterPlan, api: Api, report: Report) -> None:
    """A GPUCluster cannot run beside a ClusterPolicy: the operator reconciles neither while both exist."""
    check = "cluster-policy"
    try:
        items = api.list_items(CLUSTER_POLICIES)
    except ApiException as error:
        if error.status != 404:
            raise
        report.ok(check, "no ClusterPolicy API is served: no ClusterPolicy can exist")
        return
    names = sorted(str((i.get("metadata") or {}).get("name", "")) for i in items)
    if names:
        report.fail(
            check,
            f"ClusterPolicy {', '.join(names)} exists, but {plan.file} asks for the GPU Operator's GPUCluster "
            "(draDriver.managedBy: gpu-operator, newCluster: true): the two cannot coexist and NVIDIA supports no "
            "in-place migration. Deploy this stack to a new cluster, or keep draDriver.managedBy: chart here",
        )
    else:
        report.ok(check, "no ClusterPolicy: the GPUCluster can run")


# 2. DRAExtendedResource gate ---------------------------------------------------------------------------


def check_gate(definition: ClusterDefinition, api: Api, report: Report) -> bool:
    """Dry-run create a DeviceClass with extendedResourceName; False when resource.k8s.io/v1 is not served."""
    probe = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        # generateName: a unique name, so an object someone left behind cannot make the probe conflict.
        "metadata": {
            "generateName": PROBE_NAME_PREFIX,
            "labels": {"app.kubernetes.io/managed-by": "themelio-preflight"},
        },
        "spec": {"extendedResourceName": PROBE_RESOURCE_NAME},
    }
    check = "extended-resource-gate"
    try:
        # dryRun=All: the request runs through defaulting, validation and admission, but nothing is
        # persisted, so no object is left behind. This is the only write preflight ever sends.
        created = api.request("POST", DEVICE_CLASSES, [("dryRun", "All")], probe)
    except ApiException as error:
        if error.status == 404:
            report.fail(
                check,
                f"resource.k8s.io/v1 is not served ({api_error(error)}): DeviceClasses need Kubernetes 1.34 or "
                "later with the resource.k8s.io/v1 API enabled. DeviceClass and ResourceSlice checks skipped",
            )
            return False
        hint = " (preflight needs create on deviceclasses for a dry run)" if error.status == 403 else ""
        report.fail(check, f"the dry-run DeviceClass create failed: {api_error(error)}{hint}")
        return True
    if (created.get("spec") or {}).get("extendedResourceName") == PROBE_RESOURCE_NAME:
        report.ok(
            check,
            "a dry-run DeviceClass kept spec.extendedResourceName: DRAExtendedResource is on in kube-apiserver "
            "(kube-scheduler, kube-controller-manager and kubelet cannot be probed from the API)",
        )
        return True
    gate = definition.feature_gates.dra_extended_resource
    claim = ""
    if gate is not None and gate.enabled and Component.kube_apiserver in gate.components:
        claim = " The definition declares it on for kube-apiserver: the server disagrees."
    report.fail(
        check,
        "the API server silently dropped spec.extendedResourceName from a dry-run DeviceClass: the "
        "DRAExtendedResource feature gate is off. Set --feature-gates=DRAExtendedResource=true on "
        f"{', '.join(c.value for c in Component)} (alpha, off by default, in 1.34 and 1.35; on by default "
        f"from 1.36).{claim}",
    )
    return True


# 3. DeviceClasses ---------------------------------------------------------------------------------------


def expected_device_classes(plan: ClusterPlan) -> tuple[DeviceClassSpec, ...]:
    """The plan's classes plus the installer's class that maps a chart-served name an offering relies on.

    With the DRA chart that is its `gpu.nvidia.com`; the GPU Operator's maps no name, and the plan's own
    classes already hold the stand-in for it.
    """
    classes = {c.name: c for c in plan.device_classes}
    mapped = {d.extended_resource_name: d for d in plan.driver_classes if d.extended_resource_name}
    for offering in plan.offerings:
        names = [offering.name] if offering.served_by is ServedBy.dra_driver_chart else []
        if plan.definition.serve_migration_aliases:
            names += [a.name for a in offering.aliases if a.served_by is ServedBy.dra_driver_chart]
        for name in names:
            if name in mapped:
                driver = mapped[name]
                classes.setdefault(
                    driver.name, DeviceClassSpec(driver.name, name, driver.selector, offering.name, False)
                )
    return tuple(sorted(classes.values(), key=lambda c: c.name))


def _live_class(item: Mapping[str, Any]) -> LiveClass:
    metadata = item.get("metadata") or {}
    spec = item.get("spec") or {}
    selectors = tuple(
        str((s.get("cel") or {}).get("expression", "")) for s in spec.get("selectors") or [] if isinstance(s, dict)
    )
    return LiveClass(
        name=str(metadata.get("name", "")),
        extended_resource_name=spec.get("extendedResourceName") or None,
        selectors=selectors,
        created=str(metadata.get("creationTimestamp", "")),
    )


def winning_class(classes: Sequence[LiveClass]) -> LiveClass:
    """The class the scheduler picks (k8s/dra.py `serving_class`)."""
    return serving_class(classes, created=lambda c: c.created, name=lambda c: c.name)


def _installer(plan: ClusterPlan) -> str:
    if plan.definition.dra_by_gpu_operator:
        return f"the GPU Operator's GPUCluster (release in namespace {plan.definition.gpu_operator.namespace})"
    return f"the DRA driver release in namespace {plan.definition.dra_driver.namespace}"


def check_device_classes(plan: ClusterPlan, api: Api, report: Report) -> tuple[LiveClass, ...]:
    live = tuple(_live_class(item) for item in api.list_items(DEVICE_CLASSES))
    by_name = {c.name: c for c in live}
    by_resource: dict[str, list[LiveClass]] = defaultdict(list)
    for cls in live:
        if cls.extended_resource_name:
            by_resource[cls.extended_resource_name].append(cls)

    expected = expected_device_classes(plan)
    driver_names = {d.name for d in plan.driver_classes}
    for spec in expected:
        check = f"device-class {spec.name}"
        found = by_name.get(spec.name)
        if spec.name in driver_names:
            creator = _installer(plan)
            fix = f"upgrade {creator}"
        else:
            creator = f"the stack {plan.name}"
            fix = f"apply the stack again (cdktf deploy {plan.name})"
        if found is None:
            others = [c.name for c in by_resource.get(spec.extended_resource_name, [])]
            instead = f"; {spec.extended_resource_name} is served by {', '.join(others)} instead" if others else ""
            report.fail(check, f"missing: {creator} has not created it{instead}")
        elif found.extended_resource_name is None:
            report.fail(
                check,
                f"has no spec.extendedResourceName, the plan expects {spec.extended_resource_name}: the API server "
                f"drops the field while DRAExtendedResource is off. Enable the gate, then {fix}",
            )
        elif found.extended_resource_name != spec.extended_resource_name:
            report.fail(
                check,
                f"serves {found.extended_resource_name}, the plan expects {spec.extended_resource_name}: {fix}",
            )
        elif found.selectors != (spec.selector,):
            live_sel = " && ".join(found.selectors) or "(none)"
            report.warn(
                check,
                f"serves {spec.extended_resource_name} but its selector differs from the plan (not applied yet? "
                f"{fix}). Live: {live_sel}; planned: {spec.selector}",
            )
        else:
            report.ok(check, f"serves {spec.extended_resource_name}")

    planned_for = {c.extended_resource_name: c.name for c in expected}
    duplicates = {name: classes for name, classes in sorted(by_resource.items()) if len(classes) > 1}
    for resource, classes in duplicates.items():
        winner = winning_class(classes)
        listed = ", ".join(
            f"{c.name} (created {c.created or 'unknown'})" for c in sorted(classes, key=lambda c: c.name)
        )
        planned = planned_for.get(resource)
        verdict = f"{winner.name}, created later, wins"
        if planned is not None and planned != winner.name:
            verdict += f", not the planned {planned}"
        if planned == winner.name and planned != GPU_CLASS and {c.name for c in classes} == {planned, GPU_CLASS}:
            # servedBy: catalog for the chart's own name: replacing gpu.nvidia.com is deliberate.
            report.warn(
                f"extended-resource {resource}",
                f"served by {listed}; {verdict} as the catalog intends (servedBy: catalog). Reinstalling the "
                "DRA driver chart would make gpu.nvidia.com the newer class",
            )
            continue
        report.fail(
            f"extended-resource {resource}",
            f"served by {len(classes)} DeviceClasses: {listed}; {verdict}. Remove the name from all but one",
        )
    if not duplicates:
        report.ok("extended-resources", f"{count(len(by_resource), 'name')}, each served by one DeviceClass")
    return live


def check_device_plugin_overlap(plan: ClusterPlan, live: Sequence[LiveClass], api: Api, report: Report) -> None:
    """A node must not get one extended resource name from both a device plugin and DRA (KEP-5004)."""
    served: dict[str, set[str]] = defaultdict(set)
    for cls in live:
        if cls.extended_resource_name:
            served[cls.extended_resource_name].add(cls.name)
    for spec in expected_device_classes(plan):
        served[spec.extended_resource_name].add(spec.name)
    nodes = api.list_items(NODES, [("labelSelector", f"{DRA_KUBELET_PLUGIN}=true")])
    clashes = 0
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name", ""))
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for resource in sorted(set(allocatable) & set(served)):
            clashes += 1
            report.fail(
                f"device-plugin {name}",
                f"status.allocatable has {resource}={allocatable[resource]} from a device plugin, and the node runs "
                f"the DRA kubelet plugin ({DRA_KUBELET_PLUGIN}=true) while DeviceClass "
                f"{', '.join(sorted(served[resource]))} serves {resource}: one node must not get a name from both. "
                f"Stop the device plugin there ({DEPLOY_DEVICE_PLUGIN}=false)",
            )
    if not clashes:
        report.ok(
            "device-plugin",
            f"none of the {len(nodes)} nodes with {DRA_KUBELET_PLUGIN}=true advertises a DeviceClass's extended "
            "resource through a device plugin",
        )


# 4. ResourceSlices ---------------------------------------------------------------------------------------


_LISTED = 4  # devices named in one line; the rest are counted


def _listed(labels: Sequence[str]) -> str:
    shown = ", ".join(labels[:_LISTED])
    return f"{shown} and {len(labels) - _LISTED} more" if len(labels) > _LISTED else shown


def check_resource_slices(plan: ClusterPlan, api: Api, report: Report) -> None:
    """Match the published devices against the offerings' classes, as the scheduler's class filter would."""
    items = api.list_items(RESOURCE_SLICES)
    # Items of a list response carry no kind/apiVersion; the parser wants whole objects.
    listing = {
        "kind": "ResourceSliceList",
        "apiVersion": "resource.k8s.io/v1",
        "items": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **item} for item in items],
    }
    try:
        devices = parse_resourceslices(json.dumps(listing), f"GET {RESOURCE_SLICES}")
    except ResourceSliceError as error:
        report.fail("resource-slices", f"cannot read the published devices: {_listed(list(error.problems))}")
        return
    nodes = {d.node for d in devices}
    if devices:
        report.ok(
            "resource-slices",
            f"{count(len(devices), 'device')} in {count(len(items), 'ResourceSlice')} on {count(len(nodes), 'node')}",
        )
    else:
        report.fail(
            "resource-slices",
            f"no device is published ({len(items)} ResourceSlices): is the DRA driver's kubelet plugin running "
            f"on the GPU nodes ({DRA_KUBELET_PLUGIN}=true)?",
        )
    if plan.definition.dra_by_gpu_operator:
        check_driver_version(devices, report)
    # The same dry run as the `match` command, so both judge a cluster alike.
    result = match_cluster(plan, devices)
    by_class = {m.name: m for m in result.classes}
    offering_of = {m.name: m.offering for m in result.classes}
    primary = {c.offering: c.name for c in expected_device_classes(plan) if not c.is_alias}
    # Devices a product offering shares with the generic nvidia.com/gpu while migrating: fine, worth a note.
    shared: dict[str, set[str]] = defaultdict(set)
    shared_with: dict[str, set[str]] = defaultdict(set)
    for item in result.shared_devices:
        for name in item.classes:
            shared[name].add(item.device.label)
            shared_with[name].update(o for c in item.classes if (o := offering_of.get(c)) and c != name)

    empty = set(result.empty_classes)
    for offering in plan.offerings:
        check = f"offering {offering.name}"
        class_name = primary.get(offering.name, offering.device_class)
        found = by_class.get(class_name)
        if found is None:
            report.warn(check, f"class {class_name} was not evaluated against the devices")
        elif not found.evaluable:
            continue  # its selector errors are reported below
        elif class_name in empty or not found.devices:
            report.fail(
                check,
                f"class {class_name} selects none of the {len(devices)} published devices: no node offers "
                f"{offering.display_name}",
            )
        else:
            on = {d.node for d in found.devices}
            note = ""
            others = sorted(shared_with[class_name] - {offering.name})
            if others:
                note = f"; {len(shared[class_name])} shared with {', '.join(others)} by design"
            report.ok(
                check,
                f"{count(len(found.devices), 'device')} on {count(len(on), 'node')} (class {class_name}{note})",
            )

    # The match engine already ignores alias classes and the chart's generic nvidia.com/gpu; name only
    # the specific offerings that collide.
    chart_served = {o.name for o in plan.offerings if o.served_by is ServedBy.dra_driver_chart}
    overlaps: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for overlap in result.overlaps:
        hit = {offering_of.get(c) or c for c in overlap.classes}
        specific = hit - chart_served
        overlaps[tuple(sorted(specific if len(specific) > 1 else hit))].append(overlap.device.label)
    for names, labels in sorted(overlaps.items()):
        report.fail(
            f"overlap {' & '.join(names)}",
            f"{len(labels)} devices are selected by {len(names)} offerings ({_listed(labels)}): a request "
            "for one could take the other's hardware. Narrow their selectors",
        )
    for failure_line in _selector_failures(result):
        report.line(*failure_line)

    if result.unselected_devices:
        kinds: dict[str, list[str]] = defaultdict(list)
        for device in result.unselected_devices:
            kind = " ".join(x for x in (device.product_name, device.profile or device.device_type) if x)
            kinds[kind or device.driver].append(device.label)
        groups = "; ".join(f"{len(labels)}x {kind} ({_listed(labels)})" for kind, labels in sorted(kinds.items()))
        report.warn(
            "unselected-devices",
            f"{count(len(result.unselected_devices), 'device')} no offering selects: {groups}",
        )


def check_driver_version(devices: Sequence[Device], report: Report) -> None:
    """The GPUCluster needs driver 580 or later, which no definition can prove: the DRA driver publishes it."""
    versions: dict[str, set[str]] = defaultdict(set)
    old: set[str] = set()
    for device in devices:
        version = device.attribute("driverVersion") if device.driver == DRA_DRIVER else None
        if isinstance(version, Semver):
            versions[str(version)].add(device.node)
            if version.major < dra_mode.MIN_DRIVER_MAJOR:
                old.add(device.node)
    if old:
        found = "; ".join(f"{v} on {_listed(sorted(n))}" for v, n in sorted(versions.items()) if n & old)
        report.fail(
            "driver-version",
            f"the GPU Operator's GPUCluster needs NVIDIA driver {dra_mode.MIN_DRIVER_MAJOR} or later; published: "
            f"{found}. Upgrade the driver on those nodes",
        )
    elif versions:
        report.ok("driver-version", f"NVIDIA driver {', '.join(sorted(versions))} (the GPUCluster needs 580+)")


def _selector_failures(result: MatchReport) -> list[tuple[Status, str, str]]:
    """One line per failing selector; an evaluation error usually repeats on many devices."""
    grouped: dict[tuple[str, int, str, str], list[str]] = defaultdict(list)
    for failure in result.errors:
        key = (failure.class_name, failure.selector_index, failure.kind, failure.message)
        grouped[key].extend([failure.device.label] if failure.device is not None else [])
    lines: list[tuple[Status, str, str]] = []
    for (class_name, index, kind, message), labels in grouped.items():
        check = f"device-class {class_name}"
        if kind == "unsupported":
            lines.append(("WARN", check, f"selectors[{index}] cannot be checked offline: {message}"))
        elif kind == "compile":
            lines.append(("FAIL", check, f"selectors[{index}] does not compile: {' '.join(message.split())}"))
        else:
            lines.append(
                (
                    "FAIL",
                    check,
                    f"selectors[{index}] fails on {_listed(labels)}: {message} (allocation would abort)",
                )
            )
    return lines


# 5. ResourceQuotas --------------------------------------------------------------------------------------

_DRIVER_TEST = re.compile(r"^\s*device\.driver\s*==\s*'([^']+)'\s*(&&|$)")


def _selects_gpus(cls: LiveClass) -> bool:
    """False only for a class whose selectors pin another driver (compute-domain channels and daemons)."""
    for selector in cls.selectors:
        match = _DRIVER_TEST.match(selector)
        if match and match.group(1) != GPU_CLASS:
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


# 6. Node pools ------------------------------------------------------------------------------------------


def _taint_key(taint: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(taint.get("key", "")), str(taint.get("value") or ""), str(taint.get("effect", "")))


def node_contract_problems(node: Mapping[str, Any], pool: PoolContract) -> list[str]:
    """What the node lacks of the pool's label and taint contract; extra labels and taints are fine."""
    labels: Mapping[str, str] = (node.get("metadata") or {}).get("labels") or {}
    missing = [f"{k}={v}" for k, v in pool.labels.items() if k not in labels]
    different = [
        f"{k}={labels[k]} (contract: {v})" for k, v in pool.labels.items() if k in labels and labels[k] != v
    ]
    taints = {_taint_key(t) for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)}
    missing_taints = [str(t) for t in pool.taints if (t.key, t.value, t.effect) not in taints]
    problems = []
    if missing:
        problems.append(f"missing labels {', '.join(missing)}")
    if different:
        problems.append(f"different labels {', '.join(different)}")
    if missing_taints:
        problems.append(f"missing taints {', '.join(missing_taints)}")
    return problems


def check_pool(plan: ClusterPlan, pool: PoolContract, api: Api, report: Report) -> None:
    check = f"pool {pool.name}"
    definition = next(p for p in plan.definition.node_pools if p.name == pool.name)
    static = definition.provisioning.static
    labelled = {
        str(n["metadata"]["name"]): n
        for n in api.list_items(NODES, [("labelSelector", f"{pool.pool_label}={pool.name}")])
    }
    nodes: dict[str, Mapping[str, Any]] = {}
    failed = False
    if static is not None:
        for name in static.nodes:
            if name in labelled:
                nodes[name] = labelled[name]
                continue
            try:
                nodes[name] = api.get(f"{NODES}/{name}")
            except ApiException as error:
                if error.status != 404:
                    raise
                report.fail(check, f"node {name} (provisioning.static.nodes) does not exist")
                failed = True
        for name in sorted(set(labelled) - set(static.nodes)):
            report.warn(
                check, f"node {name} carries {pool.pool_label}={pool.name} but is not in provisioning.static.nodes"
            )
            nodes[name] = labelled[name]
    else:
        nodes = dict(labelled)
        if not nodes:
            kind = "karpenter" if definition.provisioning.karpenter is not None else "provisioned"
            report.warn(
                check,
                f"no node carries {pool.pool_label}={pool.name} yet ({kind} pool: nodes appear when they are created)",
            )
            return
    for name, node in sorted(nodes.items()):
        problems = node_contract_problems(node, pool)
        if problems:
            report.fail(check, f"node {name}: {'; '.join(problems)}")
            failed = True
    if not failed and nodes:
        report.ok(
            check, f"{count(len(nodes), 'node')} match the label and taint contract ({', '.join(sorted(nodes))})"
        )


__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "Api",
    "ClusterConnectionError",
    "Report",
    "api_kubeconfig",
    "connect",
    "expected_device_classes",
    "node_contract_problems",
    "run_preflight",
    "winning_class",
]
