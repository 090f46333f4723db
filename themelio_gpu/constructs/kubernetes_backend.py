"""Terraform's `kubernetes` state backend (state in a Secret, locking with a Lease), which cdktf 0.21 lacks.

A real `TerraformBackend` subclass, not an override: cdktf's `App.synth()` adds its default `LocalBackend`
(with an absolute path of the machine that synthesizes) to every stack that holds no backend object, and
Terraform refuses a stack with two backends ("Duplicate backend configuration").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from themelio_gpu.constructs.providers import Construct, TerraformBackend, TerraformRemoteState

NAME = "kubernetes"


class KubernetesRemoteState(TerraformRemoteState):
    """`terraform_remote_state` reading another stack's kubernetes backend (what cross-stack references use)."""

    def __init__(self, scope: Construct, id: str, config: Mapping[str, Any]) -> None:
        super().__init__(scope, id, NAME)
        # The Python binding takes only defaults/workspace; the backend's own settings go in `config`.
        self.add_override("config", dict(config))


class KubernetesBackend(TerraformBackend):
    def __init__(self, scope: Construct, config: Mapping[str, Any]) -> None:
        # "backend" is the id every cdktf backend class uses, so a stack can hold only one.
        super().__init__(scope, "backend", NAME)
        self._config = dict(config)

    # jsii calls these overrides of the protected TypeScript methods when it synthesizes the stack.
    def _synthesize_attributes(self) -> Mapping[str, Any]:
        return self._config

    def _synthesize_hcl_attributes(self) -> Mapping[str, Any]:
        return self._config

    def get_remote_state_data_source(self, scope: Construct, name: str, from_stack: str) -> TerraformRemoteState:
        return KubernetesRemoteState(scope, name, self._config)
