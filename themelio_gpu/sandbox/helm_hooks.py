"""The one Helm hook of the stacks' charts whose work the sandbox does itself: the GPU Operator's CRD upgrade.

Helm installs a chart's `crds/` at install and never touches them again. The GPU Operator's chart therefore
ships a pre-upgrade hook (templates/upgrade_crd.yaml, on with `operator.upgradeCRD`): a Job that runs
`/usr/bin/manage-crds apply --filepath=/opt/gpu-operator/<file> ...` in the operator's image, which creates or
updates (a full Update) each CRD of those files (k8s-operator-libs pkg/crdutil, vendored in the operator's
v26.7.0 source) before Helm applies the release's new objects. The sandbox runs no container: kwok marks the
hook's pod Succeeded at once and the CRDs would stay as they were. So, right before it applies a plan that
upgrades the operator's release with the hook on, the sandbox does what the Job's command does, with the same
files from the chart the stack installs (the image copies `deployments/gpu-operator/crds/` and the NFD
subchart's `crds/nfd-api-crds.yaml` to those paths; its Dockerfile): each CRD created or replaced under the
field manager `manage-crds`, then waited for until Established. Without the hook (`operator.upgradeCRD:
false`) it does nothing, and `read_back.operator_crds` shows the stale CRDs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.cluster import Sandbox, kubectl
from themelio_gpu.sandbox.tools import Toolbox

HOOK_TEMPLATE = Path("templates") / "upgrade_crd.yaml"
IMAGE_FOLDER = "/opt/gpu-operator/"
FIELD_MANAGER = "manage-crds"


def _enabled(values: Any, path: tuple[str, ...], default: bool) -> bool:
    for key in path:
        if not isinstance(values, dict) or key not in values:
            return default
        values = values[key]
    return bool(values)


def hook_files(plan: ClusterPlan, chart: Path) -> list[Path]:
    """The chart's files behind each `--filepath` of the hook's Job, as the cluster's values render it; none
    when the hook is off or the chart has none."""
    values = plan.operator_release.values
    template = chart / HOOK_TEMPLATE
    if not template.is_file() or not _enabled(values, ("operator", "upgradeCRD"), True):
        return []
    files = []
    for line in template.read_text().splitlines():
        found = re.search(rf"--filepath={re.escape(IMAGE_FOLDER)}(\S+)", line)
        if found is None:
            continue
        name = found.group(1)
        if name.startswith("nfd-") and not _enabled(values, ("nfd", "enabled"), True):
            continue
        candidates = [chart / "crds" / name, *sorted(chart.glob(f"charts/*/crds/{name}"))]
        files += [c for c in candidates if c.is_file()][:1]
    return files


def run_crd_upgrade(plan: ClusterPlan, charts: Path, toolbox: Toolbox, sandbox: Sandbox) -> list[str]:
    """Do the hook's work for the chart the plan installs; returns the CRDs it created or replaced."""
    release = plan.operator_release
    chart = charts / f"{release.chart}-{release.version}"
    listed = json.loads(kubectl(toolbox, sandbox, "get", "crd", "-o", "json"))["items"]
    versions = {c["metadata"]["name"]: c["metadata"]["resourceVersion"] for c in listed}
    done = []
    for path in hook_files(plan, chart):
        for document in yaml.safe_load_all(path.read_text()):
            if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
                continue
            name = document["metadata"]["name"]
            if name in versions:  # crdutil: Update with the existing object's resourceVersion
                document["metadata"]["resourceVersion"] = versions[name]
            verb = "replace" if name in versions else "create"
            kubectl(
                toolbox, sandbox, verb, f"--field-manager={FIELD_MANAGER}", "-f", "-", stdin=json.dumps(document)
            )
            done.append(name)
    if done:
        kubectl(
            toolbox, sandbox, "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in done)
        )
    return done
