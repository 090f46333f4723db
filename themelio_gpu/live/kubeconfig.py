"""The client for a cluster: which kubeconfig and context to use, checked before the client reads them.

A kubeconfig that cannot be used (missing, not YAML, not a kubeconfig, no such context) is bad input, said in
our words (KubeconfigError, exit 2); with `access.api` the kubeconfig is built in memory around the exec
plugin. The client only logs an exec plugin's failure: it is captured for the FAIL line.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.live.api import ClusterConnectionError


class KubeconfigError(Exception):
    """The kubeconfig cannot be used (not found, not YAML, not a kubeconfig, no such context): bad input, exit 2."""


class _LogCapture(logging.Handler):
    """The kubernetes client logs exec-plugin failures instead of raising; keep them for the FAIL line."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _capture_client_errors() -> Iterator[_LogCapture]:
    capture = _LogCapture()
    root = logging.getLogger()
    root.addHandler(capture)
    try:
        yield capture
    finally:
        root.removeHandler(capture)


def api_kubeconfig(definition: ClusterDefinition) -> dict[str, Any]:
    """An in-memory kubeconfig for `access.api`: the host, its CA and the exec credential plugin."""
    api = definition.access.api
    if api is None:
        raise ValueError(f"cluster {definition.name} has no access.api")
    exec_config: dict[str, Any] = {
        "apiVersion": api.exec.api_version,
        "command": api.exec.command,
        "args": list(api.exec.args),
        "interactiveMode": "Never",
    }
    if api.exec.env:
        exec_config["env"] = [{"name": k, "value": v} for k, v in api.exec.env.items()]
    name = definition.name
    ca = base64.b64encode(api.cluster_ca_certificate.encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": api.host, "certificate-authority-data": ca}}],
        "users": [{"name": name, "user": {"exec": exec_config}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def connect(
    definition: ClusterDefinition, kubeconfig: str | None = None, context: str | None = None
) -> tuple[k8s_client.ApiClient, list[str]]:
    """A client for the cluster and any errors the client logged while loading credentials.

    The kubeconfig is `kubeconfig`, else $KUBECONFIG (a list of files, as kubectl reads it), else the
    definition's path; the context is `context`, else the definition's. With `access.api` (and neither
    override) the kubeconfig is built in memory around the exec plugin.
    """
    configuration = k8s_client.Configuration()
    # One retry: the default three make an unreachable server take four connect timeouts to report.
    configuration.retries = 1
    access = definition.access.kubeconfig
    from_env = os.environ.get("KUBECONFIG") or None
    with _capture_client_errors() as capture:
        try:
            if kubeconfig is not None or context is not None or access is not None:
                path, source = _kubeconfig_files(kubeconfig, from_env, access.path if access else None)
                wanted = context or (access.context if access else None)
                _check_context(path, source, wanted, given=context is not None)
                try:
                    client = kube_config.new_client_from_config(
                        config_file=path,
                        context=wanted,
                        persist_config=False,  # never rewrite the user's kubeconfig
                        client_configuration=configuration,
                    )
                except (ConfigException, TypeError, AttributeError, KeyError, ValueError) as error:
                    raise KubeconfigError(
                        f"kubeconfig {source} cannot be used: {error}{client_log(capture.messages)}"
                    ) from error
            else:
                client = kube_config.new_client_from_config_dict(
                    api_kubeconfig(definition), persist_config=False, client_configuration=configuration
                )
        except ConfigException as error:
            raise ClusterConnectionError(f"{error}{client_log(capture.messages)}") from error
    return client, capture.messages


def _kubeconfig_files(flag: str | None, from_env: str | None, definition: str | None) -> tuple[str | None, str]:
    """The kubeconfig files to load (os.pathsep-separated, `~` expanded) and how messages name them."""
    given = flag or from_env or definition
    if given is None:
        return None, "~/.kube/config"
    files = os.pathsep.join(str(Path(f).expanduser()) for f in given.split(os.pathsep) if f)
    shown = files + (" (from $KUBECONFIG)" if flag is None and from_env else "")
    if not any(Path(f).is_file() for f in files.split(os.pathsep)):
        raise KubeconfigError(f"kubeconfig {shown} not found")
    return files, shown


def _check_context(files: str | None, shown: str, wanted: str | None, *, given: bool) -> None:
    """KubeconfigError unless the kubeconfig files read as kubeconfigs holding the context `wanted` (None: the
    current one): said in our words before the client says it in its own."""
    names: list[str] = []
    current = None
    for file in (f for f in (files or "").split(os.pathsep) if f and Path(f).is_file()):
        try:
            data = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as error:
            reason = _yaml_reason(error) if isinstance(error, yaml.YAMLError) else "not UTF-8 text"
            raise KubeconfigError(f"kubeconfig {shown} is not valid YAML: {reason}") from None
        if data is None:
            raise KubeconfigError(f"kubeconfig {shown}: the config file is empty")
        if not isinstance(data, dict) or not isinstance(data.get("contexts") or [], list):
            raise KubeconfigError(
                f"kubeconfig {shown} is not a kubeconfig (a mapping with clusters, users and contexts)"
            )
        names += [str(c.get("name")) for c in data.get("contexts") or [] if isinstance(c, dict)]
        current = current or data.get("current-context")
    wanted = wanted or current
    if wanted is None:
        raise KubeconfigError(f"kubeconfig {shown} has no current-context: name one with --context")
    if wanted not in names:
        where = (
            "--context" if given else "access.kubeconfig.context of the cluster's definition (or pass --context)"
        )
        known = ", ".join(names) or "none"
        raise KubeconfigError(f"kubeconfig {shown} has no context {wanted!r} (its contexts: {known}); fix {where}")


def _yaml_reason(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else problem


def client_log(messages: Sequence[str]) -> str:
    """What the client logged while loading credentials, as a suffix to a message (empty when nothing)."""
    return f" (client: {'; '.join(messages)})" if messages else ""
