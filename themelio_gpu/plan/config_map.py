"""Where a cluster publishes the catalog outputs (its catalogConfigMap), and the checks on that place.

Apart from the fleet's orchestration because the ConfigMap's namespace is created by the stack: it must be
a valid name, not a namespace every cluster has, and not one a Helm release of the same stack creates.
"""

from __future__ import annotations

from themelio_gpu.inputs.catalog.names import BUILT_IN_NAMESPACES, Names
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.plan.model import ConfigMapSpec


def config_map_spec(cluster: ClusterDefinition, names: Names) -> ConfigMapSpec | None:
    given = cluster.catalog_config_map
    if given is None:
        return None
    namespace = names.namespace if given.namespace is None else given.namespace  # "" is checked, not replaced
    return ConfigMapSpec(namespace, names.config_map_name if given.name is None else given.name)


def check_catalog_config_map(
    cluster: ClusterDefinition,
    config_map: ConfigMapSpec | None,
    dra: bool,
    names: Names,
    file: str,
    problems: Problems,
) -> None:
    if config_map is None:
        return
    namespace = config_map.namespace
    # Where the fleet's default namespace is the problem, the example would be the problem itself.
    own = (
        f"e.g. {names.namespace}"
        if namespace != names.namespace
        else "with catalogConfigMap.namespace here or names.namespace in the catalog"
    )
    # The provider checks both names as DNS subdomains; the API server wants a namespace to be a DNS label.
    for message in k8s_names.dns1123_label(namespace):
        problems.add(file, ("catalogConfigMap", "namespace"), message)
    for message in k8s_names.dns1123_subdomain(config_map.name):
        problems.add(file, ("catalogConfigMap", "name"), message)
    releases = {cluster.gpu_operator.namespace: "the GPU Operator release"}
    if dra:
        releases.setdefault(cluster.dra_driver.namespace, "the DRA driver release")
    if namespace in BUILT_IN_NAMESPACES:
        problems.add(
            file,
            ("catalogConfigMap", "namespace"),
            f"{namespace} exists in every cluster, and the stack creates this namespace "
            f"(kubernetes_namespace_v1 fails when it exists): choose one of its own, {own}",
        )
    elif namespace in releases:
        problems.add(
            file,
            ("catalogConfigMap", "namespace"),
            f"{namespace} is also the namespace of {releases[namespace]}, which creates it (create_namespace); "
            f"two resources creating one namespace race on apply: choose one of its own, {own}",
        )
