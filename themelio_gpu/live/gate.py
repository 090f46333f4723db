"""The DRAExtendedResource gate in kube-apiserver, proved by a server-side dry-run DeviceClass create.

While the gate is off the API server silently drops spec.extendedResourceName, so a class can exist and
serve no name. The dry run (`dryRun=All`) persists nothing: it is the only write preflight sends.
"""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from themelio_gpu.inputs.clusters.definition import ClusterDefinition, Component
from themelio_gpu.live.api import DEVICE_CLASSES, Api, api_error
from themelio_gpu.live.report import Report

PROBE_NAME_PREFIX = "themelio-preflight-probe-"
PROBE_RESOURCE_NAME = "preflight.themelio.io/probe"


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
