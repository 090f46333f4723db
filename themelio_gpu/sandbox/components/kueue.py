"""Kueue's own controller manager (v0.19.2, built from its source archive) for a cluster whose `kueue.yaml` has
something to admit, installed as its Helm chart of the same tag installs it, with its admission webhooks served
to the sandbox's API server.

Kueue's install is its chart (`helm template`, default values): the sandbox creates from the rendering the
CRDs (the consumers' checks use these CRDs' tag), the webhook configurations, the webhook Service and the
Secret of its certificate, and runs the manager as its Deployment's pod runs it (`--config` with the chart's
configuration, `--zap-log-level=2`), out of the cluster with the sandbox's kubeconfig. What a pod's own network
would give it is given on loopback, where two sandboxes must not collide:
- the webhooks: the API server resolves a webhook's Service to an address (its ClusterIP; no kube-proxy runs
  here). The Service `kueue-webhook-service` is made an ExternalName of 127.0.0.1, which the API server resolves
  to that host and the webhook's port; the manager serves on 127.0.0.1 at a port the kernel hands out, which each
  webhook (and each CRD's conversion webhook) names as its Service port. TLS is Kueue's own: its internal
  certificate management (on in the chart) makes a CA and a serving certificate for
  `kueue-webhook-service.kueue-system.svc`, the name the API server verifies for a Service webhook, and injects
  the CA into the webhook configurations and CRDs before the manager starts. It writes them to its Secret and
  waits for them in its certificate folder, where a pod's kubelet mounts that Secret: the sandbox does the
  kubelet's part (`mount_certificates`: the Secret's keys written to the folder once Kueue has filled it);
- its health probe on a port the kernel hands out; no metrics listener; no leader election; the certificates in
  the sandbox's folder;
- not the on-demand visibility API (feature gate VisibilityOnDemand off, its APIServices not created): an
  aggregated API server that nothing here reads, on a fixed port.
The chart's RBAC, its metrics and visibility Services and its Deployment are not created: the manager runs with
the sandbox's admin credentials, not as a pod. With the webhooks, Jobs are submitted as users submit them (the
queue label, no `suspend`): Kueue's mutating webhook suspends them until it admits them.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu import interrupts
from themelio_gpu.plan.kueue import plan_kueue
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.components.base import Component, Context, answers
from themelio_gpu.sandbox.control_plane import free_ports
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.folder import kubectl
from themelio_gpu.sandbox.rest import Rest

NAMESPACE = "kueue-system"
WEBHOOK_SERVICE = "kueue-webhook-service"
INSTALLED = (
    "CustomResourceDefinition",
    "Secret",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
)
"""The kinds of the chart's rendering the sandbox creates (and the webhook Service, as an ExternalName)."""
CERT_SECRET = "kueue-webhook-server-cert"
"""The Secret Kueue's certificate management fills (the chart's `internalCertManagement.webhookSecretName`)."""
CERT_KEYS = ("tls.crt", "tls.key", "ca.crt")
FEATURE_GATES = "VisibilityOnDemand=false"
STARTUP = 180.0
"""Seconds Kueue has to make its certificates, inject them and serve (a busy machine's)."""


def admits_anything(plan: ClusterPlan) -> bool:
    """The cluster's kueue.yaml has a ClusterQueue with a flavor and a resource to admit."""
    kueue = plan_kueue(plan)
    return bool(kueue.covered) and any(queue.flavors for queue in kueue.queues)


def render(helm: Path, chart: Path) -> list[dict[str, Any]]:
    """Kueue's chart as Helm installs it in `kueue-system` (default values)."""
    result = interrupts.run([str(helm), "template", "kueue", str(chart), "--namespace", NAMESPACE])
    if result.returncode != 0:
        raise SandboxError(f"helm template {chart}: {result.stderr.strip()}")
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def install_objects(rendered: list[dict[str, Any]], port: int) -> list[dict[str, Any]]:
    """What the sandbox creates of the rendering: its namespace, the kinds of INSTALLED with every webhook (and
    conversion webhook) naming `port` as its Service's port, and the webhook Service as an ExternalName of
    127.0.0.1 on that port."""
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    for item in rendered:
        kind = item["kind"]
        if kind == "Service" and item["metadata"]["name"] == WEBHOOK_SERVICE:
            ports = [{"name": "webhook", "port": port, "protocol": "TCP"}]
            spec = {"type": "ExternalName", "externalName": "127.0.0.1", "ports": ports}
            objects.append({**item, "spec": spec})
        elif kind in INSTALLED:
            copy = json.loads(json.dumps(item))
            for webhook in copy.get("webhooks", []):
                webhook["clientConfig"]["service"]["port"] = port
            conversion = copy.get("spec", {}).get("conversion", {}).get("webhook")
            if conversion:
                conversion["clientConfig"]["service"]["port"] = port
            objects.append(copy)
    return objects


def configuration(rendered: list[dict[str, Any]], folder: Path, webhook: int, health: int) -> dict[str, Any]:
    """The chart's manager configuration, with loopback listeners, no leader election, the certificates in
    `folder`."""
    config_map = next(i for i in rendered if i["kind"] == "ConfigMap" and i["metadata"]["name"].endswith("config"))
    config: dict[str, Any] = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    config["health"] = {**config.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{health}"}
    config["metrics"] = {**config.get("metrics", {}), "bindAddress": "0"}
    config["webhook"] = {"host": "127.0.0.1", "port": webhook, "certDir": str(folder / "certs")}
    config["leaderElection"] = {**config.get("leaderElection", {}), "leaderElect": False}
    return config


def manager_args(rendered: list[dict[str, Any]], config: Path) -> list[str]:
    """The Deployment's container arguments, its configuration file replaced by `config`."""
    deployment = next(i for i in rendered if i["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = [a for a in container.get("args", []) if not a.startswith("--config")]
    return [f"--config={config}", *args, f"--feature-gates={FEATURE_GATES}"]


def mount_certificates(api: Rest, folder: Path) -> bool:
    """What a pod's kubelet does with the certificate Secret: its keys written to `folder` (tls.crt last, the file
    Kueue waits for), once Kueue has filled it. Returns whether they are there."""
    answer = api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/{CERT_SECRET}")
    data = (answer.body.get("data") or {}) if answer.status == 200 else {}
    if not all(data.get(key) for key in CERT_KEYS):
        return False
    folder.mkdir(parents=True, exist_ok=True)
    for key in sorted(CERT_KEYS, key=lambda k: k == "tls.crt"):
        (folder / key).write_bytes(base64.b64decode(data[key]))
    return True


class Kueue(Component):
    """Kueue's controller manager (process `kueue`); its state is `kueue`: the health port and the log."""

    name = "kueue"
    tools = ("kueue", "helm")
    probe_only = True  # the stacks apply nothing of Kueue's: its queues are the consumers' files

    def wanted(self, plan: ClusterPlan) -> bool:
        return admits_anything(plan)

    def start(self, context: Context) -> dict[str, Any]:
        toolbox, sandbox = context.toolbox, context.sandbox
        rendered = render(toolbox.binary("helm"), toolbox.tools["kueue"].path("chart"))
        webhook, health = free_ports(2)
        objects = install_objects(rendered, webhook)
        crds = [o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"]
        kubectl(toolbox, sandbox, "create", "-f", "-",
                stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))  # fmt: skip
        kubectl(toolbox, sandbox, "wait", "--for=condition=Established", "--timeout=60s",
                *(f"crd/{name}" for name in crds))  # fmt: skip
        folder = sandbox.folder / "kueue"
        (folder / "certs").mkdir(parents=True, exist_ok=True)
        config = folder / "config.yaml"
        config.write_text(yaml.safe_dump(configuration(rendered, folder, webhook, health), sort_keys=True))
        log = context.log(self.name)
        command = [str(toolbox.binary("kueue")), *manager_args(rendered, config)]
        context.supervisor.start(
            self.name, command, log=log, env={**os.environ, "KUBECONFIG": str(sandbox.kubeconfig)}
        )
        return {"kueue": {"health": health, "webhook": webhook, "log": str(log)}}

    def ready(self, context: Context, state: dict[str, Any]) -> None:
        url = f"http://127.0.0.1:{state['kueue']['health']}/readyz"
        log = Path(state["kueue"]["log"])
        deadline = time.monotonic() + STARTUP
        api, certs, mounted = Rest(context.sandbox.kubeconfig), context.sandbox.folder / "kueue" / "certs", False
        while True:
            if not all(context.supervisor.running(p) for p in context.supervisor.processes(self.name)):
                raise SandboxError(f"Kueue ended while it started ({log}): {log.read_text()[-2000:]}")
            mounted = mounted or mount_certificates(api, certs)
            if not (why := answers(url)):
                break
            if time.monotonic() > deadline:
                raise SandboxError(f"Kueue is not ready at {url} ({log}): {why}")
            time.sleep(0.2)
        # The API server reaches the webhooks: a dry run goes through Kueue's ResourceFlavor webhooks.
        probe = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "probe"}}
        kubectl(context.toolbox, context.sandbox, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(probe))
        context.say(
            f"sandbox: Kueue 0.19.2 admits work, its webhooks served to the API server on 127.0.0.1:"
            f"{state['kueue']['webhook']} (log {log})"
        )
