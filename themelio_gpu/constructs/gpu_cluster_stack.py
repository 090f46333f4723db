"""One Terraform stack per cluster: providers, state backend, node pools, Helm releases, DeviceClasses."""

from __future__ import annotations

from typing import Any

from themelio_gpu.constructs.catalog_outputs import CatalogOutputs
from themelio_gpu.constructs.device_classes import DeviceClasses
from themelio_gpu.constructs.dra_driver_release import DraDriverRelease
from themelio_gpu.constructs.gpu_node_pool import GpuNodePool
from themelio_gpu.constructs.gpu_operator_release import GpuOperatorRelease
from themelio_gpu.constructs.literal import literal
from themelio_gpu.constructs.moved_blocks import add_moved_blocks
from themelio_gpu.constructs.providers import (
    ENGINE,
    HELM_PROVIDER,
    KUBERNETES_PROVIDER,
    Construct,
    HelmProvider,
    HelmProviderKubernetes,
    HelmProviderKubernetesExec,
    KubernetesProvider,
    KubernetesProviderExec,
    TerraformStack,
)
from themelio_gpu.constructs.shared_values import shared_value
from themelio_gpu.constructs.state_backend import configure_backend
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.speedups import Speedup, enabled


class GpuClusterStack(TerraformStack):
    def __init__(self, scope: Construct, plan: ClusterPlan) -> None:
        super().__init__(scope, plan.name)
        cluster = plan.definition
        self._providers(plan)  # first: it sets the `terraform` override that configure_backend may add to
        configure_backend(self, cluster.name, cluster.backend)

        # Order: node labels, then the operator, then the DRA driver chart (where the operator does not manage
        # the DRA driver), then the classes that need the driver.
        pools = [
            GpuNodePool(self, pool, contract, plan.names)
            for pool, contract in zip(cluster.node_pools, plan.pools, strict=True)
        ]
        labelled: list[Any] = [d for pool in pools for d in pool.dependables]
        add_moved_blocks(self, plan)  # renamed pools: their old addresses move to the new ones
        outputs: dict[str, Any] = {k: v for pool in pools for k, v in pool.outputs.items()}
        operator = GpuOperatorRelease(self, plan, depends_on=labelled)
        driver = operator.release
        if plan.dra_release is not None:
            driver = DraDriverRelease(self, plan, depends_on=[operator.release]).release
        if plan.dra_enabled and plan.device_classes:
            DeviceClasses(self, plan.device_classes, plan.names, depends_on=[driver])
        outputs.update(CatalogOutputs(self, plan).outputs)
        # Outputs are plain JSON: one override writes them all, instead of one jsii object (round trip) each.
        self.add_override(
            "output", {name: {"value": shared_value(v, literal)} for name, v in sorted(outputs.items())}
        )

    if ENGINE.prepare_pass_may_be_skipped:  # cdktf; CDK Terrain's pass also validates, so it always runs

        def prepare_stack(self) -> None:
            """cdktf's preparing pass, skipped: it resolves every element once only to find references to
            other stacks (and then adds the outputs and remote state they need). A cluster's stack never
            refers to another stack, and __init__ configures its backend, which is the pass's other job.
            Synthesis then resolves each element twice instead of three times (the same bytes;
            tests/test_stacks.py checks that no stack depends on another).
            THEMELIO_SPEEDUPS_OFF=skip-prepare-pass runs it (speedups.py)."""
            if not enabled(Speedup.SKIP_PREPARE_PASS):
                super().prepare_stack()

    def _providers(self, plan: ClusterPlan) -> None:
        # Every value below is the user's text: literal() keeps `${` and `%{` from being read as templates.
        access = plan.definition.access
        if access.kubeconfig is not None:
            path, context = literal(access.kubeconfig.path), literal(access.kubeconfig.context)
            KubernetesProvider(self, "kubernetes", config_path=path, config_context=context)
            HelmProvider(self, "helm", kubernetes=HelmProviderKubernetes(config_path=path, config_context=context))
        else:
            api = access.api
            assert api is not None  # the definition requires exactly one
            plugin = api.exec
            host, ca = literal(api.host), literal(api.cluster_ca_certificate)
            command, args = literal(plugin.command), literal(list(plugin.args))
            kubernetes = KubernetesProvider(
                self,
                "kubernetes",
                host=host,
                cluster_ca_certificate=ca,
                exec=[KubernetesProviderExec(api_version=plugin.api_version, command=command, args=args)],
            )
            helm = HelmProvider(
                self,
                "helm",
                kubernetes=HelmProviderKubernetes(
                    host=host,
                    cluster_ca_certificate=ca,
                    exec=HelmProviderKubernetesExec(api_version=plugin.api_version, command=command, args=args),
                ),
            )
            if plugin.env:
                # Set as overrides: the typed bindings turn map keys to snake case (AWS_PROFILE -> aws_profile).
                kubernetes.add_override("exec.0.env", literal(dict(plugin.env)))
                helm.add_override("kubernetes.exec.env", literal(dict(plugin.env)))
        # One override (one jsii round trip) for both; cdktf merges it into the terraform block key by key.
        # It replaces any earlier `terraform.*` override, so it comes before the backend's (see __init__).
        self.add_override(
            "terraform",
            {
                "required_version": plan.terraform_version,
                "required_providers": {
                    name: {"source": source, "version": version}
                    for name, source, version in (KUBERNETES_PROVIDER, HELM_PROVIDER)
                },
            },
        )
