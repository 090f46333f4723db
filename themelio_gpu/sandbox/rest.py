"""The sandbox's API server over HTTPS, from Python: the probes' many small reads, creates and deletes.

A probe makes thousands of requests; as `kubectl` processes each costs half a second or more on a busy machine,
which is most of a probe's time. The sandbox's kubeconfig (kwokctl writes it) names the API server, its CA and
the admin's client certificate and key as files; nothing else of a kubeconfig is needed here.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu.sandbox.errors import SandboxError

TIMEOUT_SECONDS = 60.0
WEBHOOK_CACHE_SECONDS = 15.0
"""How long a creation refused by a webhook that does not know its namespace yet is asked again."""
_NAMESPACE_UNKNOWN = re.compile(
    r'admission webhook "[^"]+" denied the request: .*namespaces? "([^"]+)" not found', re.I
)
"""A webhook's cache has not yet seen a namespace created a moment before (Kueue's pod webhook `mpod.kb.io`,
seen in CI under load): the API server holds it, so the creation is asked again."""

_GROUPS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "Event": ("/api/v1", "events", True),
    "ResourceQuota": ("/api/v1", "resourcequotas", True),
    "DaemonSet": ("/apis/apps/v1", "daemonsets", True),
    "DeviceClass": ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "ResourceSlice": ("/apis/resource.k8s.io/v1", "resourceslices", False),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "ResourceClaimTemplate": ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "Workload": ("/apis/kueue.x-k8s.io/v1beta2", "workloads", True),
    "LocalQueue": ("/apis/kueue.x-k8s.io/v1beta2", "localqueues", True),
    "ClusterQueue": ("/apis/kueue.x-k8s.io/v1beta2", "clusterqueues", False),
    "ResourceFlavor": ("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors", False),
    "NodeClaim": ("/apis/karpenter.sh/v1", "nodeclaims", False),
}
"""Kind -> (API path, resource, namespaced): the kinds the probes touch."""


def path(kind: str, namespace: str | None = None, name: str | None = None) -> str:
    """The REST path of a kind's collection (every namespace's without `namespace`), or of one object."""
    prefix, resource, namespaced = _GROUPS[kind]
    where = f"{prefix}/namespaces/{namespace}/{resource}" if namespaced and namespace else f"{prefix}/{resource}"
    return f"{where}/{name}" if name else where


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any

    @property
    def message(self) -> str:
        """The API server's own words for a refusal (a Status object's message)."""
        if isinstance(self.body, dict):
            return str(self.body.get("message") or self.body)
        return str(self.body)


class Rest:
    """One sandbox's API server, as its kubeconfig names it, over one kept-alive connection (a TLS handshake a
    request cost as much as the request)."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        server = urllib.parse.urlsplit(cluster["server"])
        self.host, self.port = server.hostname or "127.0.0.1", server.port or 443
        self.context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.context.load_cert_chain(user["client-certificate"], user["client-key"])
        self._connection: http.client.HTTPSConnection | None = None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __del__(self) -> None:
        self.close()

    def _send(
        self, method: str, where: str, data: bytes | None, content_type: str = "application/json"
    ) -> tuple[int, str]:
        if self._connection is None:
            self._connection = http.client.HTTPSConnection(
                self.host, self.port, context=self.context, timeout=TIMEOUT_SECONDS
            )
        self._connection.request(method, where, body=data, headers={"Content-Type": content_type})
        response = self._connection.getresponse()
        text = response.read().decode()
        if response.will_close:
            self.close()
        return response.status, text

    def request(self, method: str, where: str, body: Any = None, content_type: str = "application/json") -> Answer:
        data = json.dumps(body).encode() if body is not None else None
        try:
            try:
                status, text = self._send(method, where, data, content_type)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # The server ended the kept connection while it was idle, before it read this request (its
                # idle timeout): once more on a new connection.
                self.close()
                status, text = self._send(method, where, data, content_type)
        except (OSError, http.client.HTTPException) as error:
            self.close()
            raise SandboxError(f"the sandbox's API server did not answer {method} {where}: {error}") from None
        try:
            parsed: Any = json.loads(text) if text else None
        except json.JSONDecodeError:
            parsed = text
        return Answer(status, parsed)

    def get(self, where: str) -> Any:
        answer = self.request("GET", where)
        if answer.status != 200:
            raise SandboxError(f"GET {where}: {answer.status} {answer.message}")
        return answer.body

    def items(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Every object of the kind (in the namespace), each with its kind and apiVersion as `kubectl get` gives
        them (a list's items come without)."""
        listed = self.get(path(kind, namespace))
        return [{"apiVersion": listed["apiVersion"], "kind": kind, **item} for item in listed["items"]]

    def create(self, document: dict[str, Any]) -> str | None:
        """Create the object; None, or the API server's refusal (its message). A refusal by a webhook that has
        not seen the object's namespace yet is asked again (WEBHOOK_CACHE_SECONDS)."""
        namespace = document.get("metadata", {}).get("namespace")
        deadline = time.monotonic() + WEBHOOK_CACHE_SECONDS
        while True:
            answer = self.request("POST", path(document["kind"], namespace), document)
            if answer.status in (200, 201):
                return None
            unknown = _NAMESPACE_UNKNOWN.search(answer.message)
            if unknown is None or unknown.group(1) != namespace or time.monotonic() > deadline:
                return answer.message
            time.sleep(0.5)

    def create_all(self, documents: list[dict[str, Any]]) -> None:
        """Create each object; a refusal is a SandboxError."""
        for document in documents:
            refused = self.create(document)
            if refused is not None:
                raise SandboxError(f"creating {document['kind']} {document['metadata']['name']}: {refused}")

    def patch(self, kind: str, namespace: str | None, name: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch of the object; a refusal is a SandboxError."""
        where = path(kind, namespace, name)
        answer = self.request("PATCH", where, patch, "application/merge-patch+json")
        if answer.status != 200:
            raise SandboxError(f"PATCH {where}: {answer.status} {answer.message}")

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        """Delete the object at once (no grace period) and what it owns after it (a Job's pods); one that is gone
        already is fine."""
        where = path(kind, namespace, name) + "?gracePeriodSeconds=0&propagationPolicy=Background"
        answer = self.request("DELETE", where)
        if answer.status not in (200, 202, 404):
            raise SandboxError(f"DELETE {where}: {answer.status} {answer.message}")

    def delete_namespace(self, name: str, wait: bool = True) -> None:
        """Delete the namespace and, with `wait`, wait until the namespace controller has removed it with all it
        held (what `kubectl delete namespace --wait` does). One being removed already, or gone, is fine."""
        where = path("Namespace", None, name) + "?gracePeriodSeconds=0"
        answer = self.request("DELETE", where)
        if answer.status not in (200, 202, 404, 409):  # 409: being removed already
            raise SandboxError(f"DELETE {where}: {answer.status} {answer.message}")
        if wait:
            self.wait_namespace_gone(name)

    def wait_namespace_gone(self, name: str, seconds: float = TIMEOUT_SECONDS) -> None:
        """Until the namespace is gone; still there when the wait ends is a SandboxError."""
        deadline = time.monotonic() + seconds
        while self.request("GET", path("Namespace", None, name)).status != 404:
            if time.monotonic() > deadline:
                raise SandboxError(f"namespace {name} was not removed within {seconds:.0f} s")
            time.sleep(0.2)

    def fresh_namespace(self, name: str) -> None:
        """Create the namespace, empty: one of that name an earlier probe left (killed, or still being removed
        when it ended) is deleted and waited for first."""
        self.delete_namespace(name)
        self.create_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}])

    def serves_dra(self) -> bool:
        """The API server serves resource.k8s.io/v1 (from 1.34; before it, a device-plugin-only cluster)."""
        answer = self.request("GET", "/apis/resource.k8s.io")
        versions = (
            answer.body.get("versions", []) if answer.status == 200 and isinstance(answer.body, dict) else []
        )
        return any(v.get("version") == "v1" for v in versions)
