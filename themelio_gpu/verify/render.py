"""`helm template` of one release, exactly as the stack installs it: the same release name, namespace and
values text the Terraform `helm_release` gets (`render_values_yaml` of the plan's values), and the
cluster's Kubernetes version for the chart's capability checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu.charts.helm import ChartError, run_helm
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.k8s.dra import RESOURCE_API_MINOR, RESOURCE_API_VERSION
from themelio_gpu.plan.helm.known_values import render_values_yaml
from themelio_gpu.plan.model import HelmReleaseSpec

# The API server serves these; helm template cannot discover them, and some charts branch on them
# (gpu-operator v26.7.0 refuses its GPUCluster without DeviceClass).
RESOURCE_API_VERSIONS = (RESOURCE_API_VERSION, f"{RESOURCE_API_VERSION}/DeviceClass")
# libyaml when present: the charts' CRDs are megabytes of YAML.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class RenderedRelease:
    spec: HelmReleaseSpec
    objects: tuple[Mapping[str, Any], ...]


def template_args(
    spec: HelmReleaseSpec, chart_dir: Path, values_file: Path, cluster: ClusterDefinition
) -> list[str]:
    args = [
        "template",
        spec.name,
        str(chart_dir),
        "--namespace",
        spec.namespace,
        "--values",
        str(values_file),
        "--kube-version",
        cluster.kubernetes_version,
        # helm install applies the chart's crds/ too: validate them with the rest.
        "--include-crds",
    ]
    if cluster.minor_version >= RESOURCE_API_MINOR:
        for api in RESOURCE_API_VERSIONS:
            args += ["--api-versions", api]
    return args


def render_release(
    helm: str, spec: HelmReleaseSpec, chart_dir: Path, cluster: ClusterDefinition, work_dir: Path
) -> RenderedRelease:
    values_file = work_dir / f"{cluster.name}.{spec.name}.values.yaml"
    values_file.write_text(render_values_yaml(spec.values), encoding="utf-8")
    what = f"helm template {spec.name} ({spec.chart} {spec.version}) refused the values"
    text = run_helm(helm, template_args(spec, chart_dir, values_file, cluster), what)
    try:
        documents = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as error:
        raise ChartError(
            f"helm template {spec.name} ({spec.chart} {spec.version}) wrote unreadable YAML: {error}"
        ) from None
    objects: list[Mapping[str, Any]] = []
    for document in documents:
        if document is None:
            continue
        if not isinstance(document, dict) or "kind" not in document:
            raise ChartError(f"helm template {spec.name}: a rendered document is not a Kubernetes object")
        # A List wraps objects (extraObjects may render one).
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            objects.extend(item for item in document["items"] if isinstance(item, dict))
        else:
            objects.append(document)
    return RenderedRelease(spec, tuple(objects))
