"""A fake Kubernetes API server on 127.0.0.1, serving recorded-shape JSON from a scenario folder.

It is a real HTTP server, so `preflight` runs through the official kubernetes client exactly as against a
cluster. Folder layout and scenario.yaml keys: tests/fixtures/apiserver/README.md. In short:

- `GET /<path>` serves `<scenario>/<path>.json` (`/version` -> `version.json`,
  `/api/v1/nodes` -> `api/v1/nodes.json`); a file missing in the scenario is taken from its `base`.
- `GET /<collection>/<name>` serves the item of that name from `<collection>.json`.
- `labelSelector` is applied here, in Python, to the recorded list (equality, inequality, existence).
- `POST` to a collection is answered only with `dryRun=All`: the body is echoed back with the fields the
  API server fills in, minus `spec.extendedResourceName` when the scenario has `extendedResourceGate: false`
  (what kube-apiserver does with the DRAExtendedResource gate off). Any other write is refused with 403.
- Every request is recorded in `FakeApiServer.requests`, so a test can assert what was written.

Run one by hand: `python -m tests.fakeapi healthy` prints its URL and serves until Ctrl-C.
"""

from __future__ import annotations

import copy
import json
import random
import sys
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml
from kubernetes import client as k8s_client

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "apiserver"
# The only collection that accepts a (dry-run) create.
WRITABLE = ("/apis/resource.k8s.io/v1/deviceclasses",)

Json = dict[str, Any]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Json | None

    @property
    def dry_run(self) -> bool:
        return self.query.get("dryRun") == ["All"]


@dataclass(frozen=True)
class Scenario:
    name: str
    folders: tuple[Path, ...]
    """The scenario folder first, then its bases: the first folder holding a file wins."""
    extended_resource_gate: bool = True
    absent: tuple[str, ...] = ()
    """Path prefixes answered with 404, as for an API group the server does not serve."""

    def find(self, relative: str) -> Path | None:
        return next((f / relative for f in self.folders if (f / relative).is_file()), None)


def load_scenario(name_or_path: str | Path) -> Scenario:
    folder = Path(name_or_path)
    if not folder.is_absolute():
        folder = SCENARIOS / folder
    if not folder.is_dir():
        raise FileNotFoundError(f"no scenario folder {folder}")
    settings_file = folder / "scenario.yaml"
    settings: Json = (yaml.safe_load(settings_file.read_text()) or {}) if settings_file.is_file() else {}
    base = load_scenario(folder.parent / settings["base"]) if settings.get("base") else None
    return Scenario(
        name=folder.name,
        folders=(folder, *(base.folders if base else ())),
        extended_resource_gate=bool(
            settings.get("extendedResourceGate", base.extended_resource_gate if base else True)
        ),
        absent=tuple(settings.get("absent", base.absent if base else ())),
    )


def status(code: HTTPStatus, message: str, reason: str, details: Json | None = None) -> Json:
    """A `Status` body like the API server's error responses."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": int(code),
    }


def _label_matcher(selector: str) -> list[tuple[str, str, str | None]]:
    """`a=b,c!=d,e,!f` -> [(op, key, value)]; set-based selectors (`in`, `notin`) are not recorded here."""
    terms: list[tuple[str, str, str | None]] = []
    for raw in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in raw:
            key, value = raw.split("!=", 1)
            terms.append(("!=", key.strip(), value.strip()))
        elif "=" in raw:
            key, value = raw.split("==", 1) if "==" in raw else raw.split("=", 1)
            terms.append(("=", key.strip(), value.strip()))
        elif raw.startswith("!"):
            terms.append(("!", raw[1:].strip(), None))
        elif " " in raw or "(" in raw:
            raise ValueError(f"unsupported label selector term {raw!r}")
        else:
            terms.append(("exists", raw, None))
    return terms


def _matches(labels: dict[str, str], terms: list[tuple[str, str, str | None]]) -> bool:
    for op, key, value in terms:
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and key in labels and labels[key] == value:
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "!" and key in labels:
            return False
    return True


@dataclass
class FakeApiServer:
    scenario: Scenario
    requests: list[RecordedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def for_scenario(cls, name_or_path: str | Path) -> FakeApiServer:
        return cls(load_scenario(name_or_path))

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        fake = self

        class Handler(_Handler):
            server_ref = fake

        # Port 0: the OS picks a free port, so tests can run in parallel.
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits for it, once per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fakeapi", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def api_client(self) -> k8s_client.ApiClient:
        """A kubernetes client for this server (plain HTTP, no credentials)."""
        configuration = k8s_client.Configuration(host=self.url)
        configuration.retries = 0
        return k8s_client.ApiClient(configuration)

    def kubeconfig(self, context: str) -> Json:
        """A kubeconfig document pointing `context` at this server."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": context,
        }

    @property
    def writes(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.method not in ("GET", "HEAD")]

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # --- responses ---------------------------------------------------------------------------------------

    def _absent(self, path: str) -> bool:
        return any(path == a or path.startswith(a.rstrip("/") + "/") for a in self.scenario.absent)

    def get(self, path: str, query: dict[str, list[str]]) -> tuple[HTTPStatus, Json]:
        not_found = status(HTTPStatus.NOT_FOUND, "the server could not find the requested resource", "NotFound")
        if self._absent(path):
            return HTTPStatus.NOT_FOUND, not_found
        relative = path.strip("/")
        file = self.scenario.find(f"{relative}.json")
        if file is not None:
            data: Json = json.loads(file.read_text())
            selector = query.get("labelSelector", [""])[0]
            if selector and isinstance(data.get("items"), list):
                try:
                    terms = _label_matcher(selector)
                except ValueError as error:
                    return HTTPStatus.BAD_REQUEST, status(HTTPStatus.BAD_REQUEST, str(error), "BadRequest")
                data["items"] = [
                    i for i in data["items"] if _matches((i.get("metadata") or {}).get("labels") or {}, terms)
                ]
            return HTTPStatus.OK, data
        if "/" in relative:
            collection, name = relative.rsplit("/", 1)
            list_file = self.scenario.find(f"{collection}.json")
            if list_file is not None:
                listing: Json = json.loads(list_file.read_text())
                for item in listing.get("items") or []:
                    if (item.get("metadata") or {}).get("name") == name:
                        # List items omit kind/apiVersion; a single GET carries them.
                        kind = str(listing.get("kind", "")).removesuffix("List")
                        return HTTPStatus.OK, {"kind": kind, "apiVersion": listing.get("apiVersion"), **item}
                plural = collection.rsplit("/", 1)[-1]
                return HTTPStatus.NOT_FOUND, status(
                    HTTPStatus.NOT_FOUND,
                    f'{plural} "{name}" not found',
                    "NotFound",
                    {"name": name, "kind": plural},
                )
        return HTTPStatus.NOT_FOUND, not_found

    def create(self, path: str, query: dict[str, list[str]], body: Json | None) -> tuple[HTTPStatus, Json]:
        if self._absent(path) or path not in WRITABLE:
            return HTTPStatus.NOT_FOUND, status(
                HTTPStatus.NOT_FOUND, "the server could not find the requested resource", "NotFound"
            )
        if query.get("dryRun") != ["All"]:
            return HTTPStatus.FORBIDDEN, status(
                HTTPStatus.FORBIDDEN, "fake API server: only dryRun=All writes are accepted", "Forbidden"
            )
        if not isinstance(body, dict):
            return HTTPStatus.BAD_REQUEST, status(HTTPStatus.BAD_REQUEST, "expected a JSON object", "BadRequest")
        created = copy.deepcopy(body)
        metadata = created.setdefault("metadata", {})
        if "name" not in metadata and "generateName" in metadata:
            suffix = "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
            metadata["name"] = metadata["generateName"] + suffix
        metadata.update(
            {
                "uid": str(uuid.uuid4()),
                "generation": 1,
                "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
        if not self.scenario.extended_resource_gate:
            # kube-apiserver's dropDisabledDRAExtendedResourceFields: dropped silently, no warning.
            (created.get("spec") or {}).pop("extendedResourceName", None)
        return HTTPStatus.CREATED, created


class _Handler(BaseHTTPRequestHandler):
    server_ref: FakeApiServer
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    # Headers and body go out in two writes: without TCP_NODELAY, Nagle plus delayed ACKs add ~40 ms each.
    disable_nagle_algorithm = True

    def _split(self) -> tuple[str, dict[str, list[str]]]:
        parts = urlsplit(self.path)
        return unquote(parts.path), parse_qs(parts.query)

    def _body(self) -> Json | None:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        try:
            data = json.loads(self.rfile.read(length))
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def _send(self, code: HTTPStatus, payload: Json) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        path, query = self._split()
        self.server_ref.record(RecordedRequest("GET", path, query, None))
        self._send(*self.server_ref.get(path, query))

    def do_POST(self) -> None:
        path, query = self._split()
        body = self._body()
        self.server_ref.record(RecordedRequest("POST", path, query, body))
        self._send(*self.server_ref.create(path, query, body))

    def _refuse(self) -> None:
        path, query = self._split()
        self.server_ref.record(RecordedRequest(self.command, path, query, self._body()))
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED,
            status(
                HTTPStatus.METHOD_NOT_ALLOWED, f"fake API server: {self.command} is refused", "MethodNotAllowed"
            ),
        )

    def do_PUT(self) -> None:
        self._refuse()

    def do_PATCH(self) -> None:
        self._refuse()

    def do_DELETE(self) -> None:
        self._refuse()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean; requests are recorded instead


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: python -m tests.fakeapi <scenario>; scenarios in {SCENARIOS}", file=sys.stderr)
        return 2
    server = FakeApiServer.for_scenario(argv[0]).start()
    print(f"serving scenario {argv[0]} at {server.url} (Ctrl-C stops)", file=sys.stderr)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["SCENARIOS", "FakeApiServer", "RecordedRequest", "Scenario", "load_scenario"]
