"""Which attributes make the provider replace a resource (destroy, then create) instead of updating it.

Per resource type the stacks emit, read from the providers' source at the versions the stacks pin
(hashicorp/kubernetes 2.38.0, hashicorp/helm 3.1.1): `ForceNew: true` in the SDKv2 schemas, the
`RequiresReplace` plan modifiers of the plugin framework, and the paths kubernetes_manifest returns in
`RequiresReplace` when it plans. A path is the argument as the stack's JSON writes it (blocks as objects).
docs/changed.md lists the same table; tests/test_changed.py checks that every type the fixture fleets
synthesize has an entry here.

What is not modelled: kubernetes_manifest replaces any change of a custom resource whose CRD has no OpenAPI
schema (plan.go L342-L377; the Karpenter NodePool CRD and the built-in DeviceClass have one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KUBERNETES = "https://github.com/hashicorp/terraform-provider-kubernetes/blob/v2.38.0"
HELM = "https://github.com/hashicorp/terraform-provider-helm/blob/v3.1.1"
_MISSING = object()


@dataclass(frozen=True)
class ReplaceRule:
    path: tuple[str, ...]
    source: str
    """Where the provider says so: file and line at the pinned version."""
    default: Any = _MISSING
    """The provider's default for an argument the configuration may leave out (same value, no replace)."""
    when: tuple[str, ...] | None = None
    """Only while this boolean argument is true in the deployed (base) configuration."""

    @property
    def attribute(self) -> str:
        return ".".join(self.path)


def _metadata(generate_name_line: int) -> tuple[ReplaceRule, ...]:
    """schema_metadata.go: `name` is ForceNew in every metadata block; so is `generate_name` where it exists."""
    return (
        ReplaceRule(("metadata", "name"), f"{KUBERNETES}/kubernetes/schema_metadata.go#L37"),
        ReplaceRule(
            ("metadata", "generate_name"), f"{KUBERNETES}/kubernetes/schema_metadata.go#L{generate_name_line}"
        ),
    )


REPLACE_RULES: Mapping[str, tuple[ReplaceRule, ...]] = {
    # resource_kubernetes_labels.go: api_version, kind and both metadata fields are ForceNew.
    "kubernetes_labels": (
        ReplaceRule(("api_version",), f"{KUBERNETES}/kubernetes/resource_kubernetes_labels.go#L39"),
        ReplaceRule(("kind",), f"{KUBERNETES}/kubernetes/resource_kubernetes_labels.go#L45"),
        ReplaceRule(("metadata", "name"), f"{KUBERNETES}/kubernetes/resource_kubernetes_labels.go#L57"),
        ReplaceRule(("metadata", "namespace"), f"{KUBERNETES}/kubernetes/resource_kubernetes_labels.go#L63"),
    ),
    # resource_kubernetes_node_taint.go: only the node's name; the taint block's key, value and effect
    # (nodeTaintFields, schema_node_spec.go L163-181) are plain Required fields, updated in place.
    "kubernetes_node_taint": (
        ReplaceRule(("metadata", "name"), f"{KUBERNETES}/kubernetes/resource_kubernetes_node_taint.go#L56"),
    ),
    # manifest/provider/plan.go: PlanResourceChange returns these in RequiresReplace (namespace only for
    # namespaced kinds: a cluster-scoped object has none, so it never differs).
    "kubernetes_manifest": (
        ReplaceRule(("manifest", "apiVersion"), f"{KUBERNETES}/manifest/provider/plan.go#L186"),
        ReplaceRule(("manifest", "kind"), f"{KUBERNETES}/manifest/provider/plan.go#L187"),
        ReplaceRule(("manifest", "metadata", "name"), f"{KUBERNETES}/manifest/provider/plan.go#L188"),
        ReplaceRule(("manifest", "metadata", "namespace"), f"{KUBERNETES}/manifest/provider/plan.go#L332"),
    ),
    # helm/resource_helm_release.go: stringplanmodifier.RequiresReplace() on name and namespace only; a new
    # chart, repository, version or values is a `helm upgrade`.
    "helm_release": (
        ReplaceRule(("name",), f"{HELM}/helm/resource_helm_release.go#L417"),
        ReplaceRule(("namespace",), f"{HELM}/helm/resource_helm_release.go#L429", default="default"),
    ),
    # resource_kubernetes_namespace_v1.go L34: metadataSchema("namespace", true): name and generate_name.
    "kubernetes_namespace_v1": _metadata(62),
    # resource_kubernetes_config_map_v1.go L55: namespacedMetadataSchema: name, namespace, generate_name;
    # and its CustomizeDiff (L30-51) forces new on data, binary_data and immutable once immutable is true.
    "kubernetes_config_map_v1": (
        *_metadata(103),
        ReplaceRule(
            ("metadata", "namespace"), f"{KUBERNETES}/kubernetes/schema_metadata.go#L95", default="default"
        ),
        *(
            ReplaceRule(
                (name,),
                f"{KUBERNETES}/kubernetes/resource_kubernetes_config_map_v1.go#L39-L48",
                when=("immutable",),
            )
            for name in ("data", "binary_data", "immutable")
        ),
    ),
}


def lookup(config: Any, path: tuple[str, ...]) -> Any:
    """The value at `path`, descending into one-element lists (a block may be written as a list of one)."""
    value = config
    for part in path:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def forcing_rules(resource_type: str, base: Any, head: Any) -> tuple[ReplaceRule, ...]:
    """The rules whose attribute differs between the deployed and the new configuration."""
    found = []
    for rule in REPLACE_RULES[resource_type]:
        if rule.when is not None and lookup(base, rule.when) is not True:
            continue
        before, after = lookup(base, rule.path), lookup(head, rule.path)
        if rule.default is not _MISSING:
            before = rule.default if before is _MISSING else before
            after = rule.default if after is _MISSING else after
        if before != after:
            found.append(rule)
    return tuple(found)
