"""The probes' client of the sandbox's API server (sandbox/rest.py), against a local HTTPS server that asks for
the client's certificate as kube-apiserver does: one kept-alive connection for many requests, a new one when the
server has ended the kept one, and a server that does not answer is a SandboxError, not a traceback.

Needs the `openssl` command (certificates made here); skipped with the reason without it, never in CI.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from tests.requirements import unavailable
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.rest import Rest, path


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)


def _certificates(folder: Path) -> None:
    """A CA, the server's certificate for 127.0.0.1 and a client's, as kwokctl makes them for a sandbox."""
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        folder, "req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=ca"
    )
    (folder / "server.ext").write_text("subjectAltName=IP:127.0.0.1\n", encoding="utf-8")
    for name, extra in (("server", ["-extfile", "server.ext"]), ("admin", [])):
        _openssl(folder, "req", *curve, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        _openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", *extra)  # fmt: skip


@dataclass
class Server:
    port: int
    connections: list[str] = field(default_factory=list)
    """The client certificate's subject of each connection the server accepted."""
    end_after: set[int] = field(default_factory=set)
    """Request numbers after whose answer the server ends the connection without saying so (an idle timeout)."""
    requests: int = 0
    removing: int = 0
    """GETs of the namespace still answered after its DELETE (being removed), before 404."""
    log: list[str] = field(default_factory=list)
    webhook_refusals: int = 0
    """POSTs refused first by a webhook that has not seen the namespace `unknown` yet (Kueue's, under load)."""
    unknown: str = ""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    if shutil.which("openssl") is None:
        unavailable("the openssl command makes this test's certificates")
    _certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "ca.crt"))
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    context.verify_mode = ssl.CERT_REQUIRED

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver answers

        def setup(self) -> None:
            super().setup()
            peer = self.connection.getpeercert() or {}
            state.connections.append(str(dict(x[0] for x in peer.get("subject", ()))["commonName"]))

        def _answer(self, status: int, document: dict[str, object]) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_DELETE(self) -> None:
            state.log.append(f"DELETE {self.path}")
            self._answer(409, {"kind": "Status", "message": "the namespace is being removed"})

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            state.log.append(f"POST {self.path} {json.loads(self.rfile.read(length))['metadata']['name']}")
            if state.webhook_refusals:
                state.webhook_refusals -= 1
                message = (
                    f'admission webhook "mpod.kb.io" denied the request: Namespace "{state.unknown}" not found'
                )
                self._answer(400, {"kind": "Status", "message": message})
                return
            self._answer(201, {})

        def do_GET(self) -> None:
            state.requests += 1
            if state.log:
                state.log.append(f"GET {self.path}")
                if state.removing:
                    state.removing -= 1
                else:
                    self._answer(404, {"kind": "Status"})
                    return
            self._answer(200, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
            if state.requests in state.end_after:
                self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    state = Server(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "clusters": [{"name": "s", "cluster": {"server": f"https://127.0.0.1:{state.port}",
                                               "certificate-authority": str(tmp_path / "ca.crt")}}],
        "users": [{"name": "admin", "user": {"client-certificate": str(tmp_path / "admin.crt"),
                                             "client-key": str(tmp_path / "admin.key")}}],
    }), encoding="utf-8")  # fmt: skip
    try:
        yield state, kubeconfig
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_many_requests_go_over_one_connection_with_the_admins_certificate(server: tuple[Server, Path]) -> None:
    state, kubeconfig = server
    api = Rest(kubeconfig)
    for _ in range(5):
        assert api.get(path("Namespace", None, "x"))["metadata"]["name"] == "x"
    api.close()
    assert state.requests == 5
    assert state.connections == ["admin"]


def test_a_connection_the_server_ended_is_replaced_and_the_request_answered(server: tuple[Server, Path]) -> None:
    state, kubeconfig = server
    state.end_after = {2}
    api = Rest(kubeconfig)
    for _ in range(4):
        assert api.get(path("Namespace", None, "x"))["kind"] == "Namespace"
    api.close()
    assert state.requests == 4
    assert state.connections == ["admin", "admin"]


def test_a_server_that_does_not_answer_is_a_sandbox_error(server: tuple[Server, Path], tmp_path: Path) -> None:
    state, kubeconfig = server
    gone = tmp_path / "gone"
    gone.write_text(kubeconfig.read_text(encoding="utf-8").replace(f":{state.port}", ":1"), encoding="utf-8")
    with pytest.raises(SandboxError, match=r"the sandbox's API server did not answer GET /api/v1/namespaces/x"):
        Rest(gone).get(path("Namespace", None, "x"))


def test_a_fresh_namespace_waits_until_one_of_that_name_being_removed_is_gone(server: tuple[Server, Path]) -> None:
    state, kubeconfig = server
    state.removing = 2
    Rest(kubeconfig).fresh_namespace("x")
    namespace = "/api/v1/namespaces/x"
    assert state.log == [f"DELETE {namespace}?gracePeriodSeconds=0", *[f"GET {namespace}"] * 3,
                         "POST /api/v1/namespaces x"]  # fmt: skip


def test_a_webhook_that_has_not_seen_the_new_namespace_yet_is_asked_again(server: tuple[Server, Path]) -> None:
    """Kueue's pod webhook refused a pod in a namespace created a moment before (its cache lagged, in CI under
    load): the creation is asked again until it is accepted; the same refusal for another namespace is final."""
    state, kubeconfig = server
    api = Rest(kubeconfig)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "q"}}
    state.webhook_refusals, state.unknown = 2, "q"
    assert api.create(pod) is None
    assert state.log == [f"POST {path('Pod', 'q')} p"] * 3
    state.webhook_refusals, state.unknown = 5, "elsewhere"
    refused = api.create(pod)
    assert refused is not None and 'Namespace "elsewhere" not found' in refused and state.webhook_refusals == 4
    api.close()
