"""The one Helm hook of the stacks' charts the sandbox runs itself: the GPU Operator's CRD upgrade, with NVIDIA's
own `manage-crds`.

Helm installs a chart's `crds/` at install and never touches them again. The GPU Operator's chart therefore
ships a pre-upgrade hook (templates/upgrade_crd.yaml, on with `operator.upgradeCRD`): a Job that runs
`/usr/bin/manage-crds apply --filepath=/opt/gpu-operator/<file> ...` in the operator's image, which creates or
updates each CRD of those files (k8s-operator-libs pkg/crdutil) before Helm applies the release's new objects.
The sandbox runs no container: kwok marks the hook's pod Succeeded at once and the CRDs would stay as they were.
So, right before it applies a plan that upgrades the operator's release, the sandbox renders the hook's Job as
Helm does for the cluster's values (`helm template --show-only`) and runs the Job's command and arguments with
`manage-crds` built from the source of the version the Job's image names (tools.toml `gpu-operator-crds-*`),
the CRD files at /opt/gpu-operator as the image has them (its Dockerfile), in a mount namespace of its own (as the
operator's controller runs, components/gpu_operator.py), against the sandbox's API server. Without the hook
(`operator.upgradeCRD: false`, or a chart without it) nothing runs, and `read_back.operator_crds` shows the stale
CRDs. What the Job's pod has and this run has not: its service account (the run uses the sandbox's admin
kubeconfig, so RBAC the chart gives the hook is not exercised).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu import interrupts
from themelio_gpu.plan.helm.known_values import render_values_yaml
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.cluster import Sandbox, kubectl
from themelio_gpu.sandbox.components.gpu_operator import manage_crds_tools, unshare_command
from themelio_gpu.sandbox.components.operator_launcher import MOUNT, image_version
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import Toolbox

HOOK_TEMPLATE = "templates/upgrade_crd.yaml"
MANAGE_CRDS = "manage-crds"
IMAGE_PATH = f"/usr/bin/{MANAGE_CRDS}"
"""Where the operator's image has the program (docker/Dockerfile); the Job's command names it."""
FILES = "opt/gpu-operator"
"""The built tool's folder of the CRD files, bound at /opt/gpu-operator."""


def hook_job(plan: ClusterPlan, chart: Path, toolbox: Toolbox) -> dict[str, Any] | None:
    """The hook's Job as Helm renders it for the cluster's values; None when the chart has no such hook or the
    values turn it off."""
    release = plan.operator_release
    if not (chart / HOOK_TEMPLATE).is_file():
        return None
    with tempfile.TemporaryDirectory(prefix="themelio-hook-") as scratch:
        values = Path(scratch) / "values.yaml"
        values.write_text(render_values_yaml(release.values), encoding="utf-8")
        result = interrupts.run(
            [str(toolbox.binary("helm")), "template", release.name, str(chart), "--namespace", release.namespace,
             "--values", str(values), "--show-only", HOOK_TEMPLATE,
             "--kube-version", plan.definition.kubernetes_version]
        )  # fmt: skip
    if result.returncode != 0:
        if "could not find template" in result.stderr:
            return None  # rendered empty: the values turn the hook off
        raise SandboxError(f"helm template of the GPU Operator's CRD hook ({chart.name}): {result.stderr.strip()}")
    jobs = [d for d in yaml.safe_load_all(result.stdout) if isinstance(d, dict) and d.get("kind") == "Job"]
    return jobs[0] if jobs else None


def _versions(toolbox: Toolbox, sandbox: Sandbox) -> dict[str, str]:
    listed = json.loads(kubectl(toolbox, sandbox, "get", "crd", "-o", "json"))["items"]
    return {c["metadata"]["name"]: c["metadata"]["resourceVersion"] for c in listed}


def run_crd_upgrade(plan: ClusterPlan, charts: Path, toolbox: Toolbox, sandbox: Sandbox) -> list[str]:
    """Run the hook's Job command for the chart the plan installs; returns the CRDs it created or changed."""
    release = plan.operator_release
    chart = charts / f"{release.chart}-{release.version}"
    job = hook_job(plan, chart, toolbox)
    if job is None:
        return []
    container = job["spec"]["template"]["spec"]["containers"][0]
    command = [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
    if not command or command[0] != IMAGE_PATH:
        raise SandboxError(
            f"the GPU Operator's CRD hook ({chart.name}) runs {' '.join(command[:1]) or 'nothing'}; the sandbox "
            f"runs NVIDIA's {IMAGE_PATH} only"
        )
    version = image_version(container)
    tool = manage_crds_tools().get(version)
    if tool is None:
        raise SandboxError(
            f"the GPU Operator's CRD hook runs the image {container.get('image')}: no build of its {MANAGE_CRDS} "
            f"here (tools.toml builds {', '.join(manage_crds_tools())})"
        )
    unshare = unshare_command()
    if unshare is None:
        raise SandboxError(
            f"no private mount namespace here for {MANAGE_CRDS}, which reads its CRD files at /opt/gpu-operator"
        )
    before = _versions(toolbox, sandbox)
    env = dict(os.environ, KUBECONFIG=str(sandbox.kubeconfig))
    ran = interrupts.run(
        [*unshare, "/bin/sh", "-c", MOUNT, MANAGE_CRDS, str(toolbox.binary(tool, FILES)),
         str(toolbox.binary(tool, MANAGE_CRDS)), *command[1:]],
        env=env,
    )  # fmt: skip
    if ran.returncode != 0:
        raise SandboxError(
            f"NVIDIA's {MANAGE_CRDS} {version} (the GPU Operator's CRD hook) failed (exit {ran.returncode}): "
            f"{(ran.stderr or ran.stdout).strip()[-3000:]}"
        )
    after = _versions(toolbox, sandbox)
    return sorted(name for name, seen in after.items() if before.get(name) != seen)
