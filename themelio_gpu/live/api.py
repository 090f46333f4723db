"""The HTTP transport to the API server: raw JSON requests through the official client, and its errors.

Every check reads through `Api` so each sees what `kubectl get --raw` shows, with timeouts, paging and one
message shape for an unreachable server (ClusterConnectionError) or a refused request (`api_error`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

RESOURCE_API = "/apis/resource.k8s.io/v1"
DEVICE_CLASSES = f"{RESOURCE_API}/deviceclasses"
RESOURCE_SLICES = f"{RESOURCE_API}/resourceslices"
NODES = "/api/v1/nodes"
CLUSTER_POLICIES = "/apis/nvidia.com/v1/clusterpolicies"
RESOURCE_QUOTAS = "/api/v1/resourcequotas"

# (connect, read) seconds: a preflight must not hang on an unreachable or overloaded API server.
REQUEST_TIMEOUT = (10, 60)
PAGE_SIZE = 500


class ClusterConnectionError(Exception):
    """The cluster cannot be reached or the client cannot be configured; the message says why."""


class Api:
    """Raw JSON requests: plain dicts keep the checks close to what `kubectl get --raw` shows."""

    def __init__(self, client: k8s_client.ApiClient) -> None:
        self.client = client

    @property
    def host(self) -> str:
        return str(self.client.configuration.host)

    def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        # The client's own request path (auth settings, TLS, retries, timeouts) without its model
        # deserialization: with `_preload_content=False` it returns the urllib3 response as it came, and raises
        # ApiException (its body decoded) for any status outside 200-299. kubernetes 36's generated client.
        try:
            response = self.client.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=dict(body) if body is not None else None,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise ClusterConnectionError(f"cannot reach {self.host}: {_network_reason(error)}") from error
        try:
            data = json.loads(response.data or b"{}")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ClusterConnectionError(
                f"{path} did not return a JSON object; is {self.host} a Kubernetes API server?"
            )
        return data

    def get(self, path: str, query: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
        return self.request("GET", path, query)

    def list_items(self, path: str, query: Sequence[tuple[str, str]] = ()) -> list[dict[str, Any]]:
        """Every item of a list, following `continue` tokens so large clusters are read in pages."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            page = [*query, ("limit", str(PAGE_SIZE))] + ([("continue", token)] if token else [])
            data = self.get(path, page)
            items.extend(data.get("items") or [])
            token = (data.get("metadata") or {}).get("continue") or ""
            if not token:
                return items


_CONNECTION_REPR = re.compile(r"^(<[^>]*>|\w+\([^)]*\)): ")


def _network_reason(error: Exception) -> str:
    reason = getattr(error, "reason", None) or error
    # urllib3 prefixes the connection object's repr; the OS error after it is what a user needs.
    return _CONNECTION_REPR.sub("", str(reason))


def api_error(error: ApiException) -> str:
    """`HTTP 403 Forbidden: <the server's Status message>`."""
    message = ""
    if error.body:
        try:
            body = json.loads(error.body)
            message = body.get("message", "") if isinstance(body, dict) else ""
        except ValueError:
            message = str(error.body)[:200]
    text = f"HTTP {error.status} {error.reason or ''}".rstrip()
    return f"{text}: {message}" if message else text
