"""The one detector of credentials in user input: nothing secret may reach cdktf.out or the Terraform state.

Every string in a catalog or cluster file (keys too) is checked by its value: JWTs, AWS keys, PEM private
keys, GitHub/GitLab/Slack/HCP Terraform/Vault/npm tokens, bearer and basic credentials, URLs carrying a
password, long random strings. Where a file names things freely, names count too: exec plugin flags
(`--token X`), exec plugin environment variables, Helm values keys (`password: ...`). Findings never repeat
the secret; each says how to pass it instead.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Path = tuple[str | int, ...]

# --- Values --------------------------------------------------------------------------------------------------

_CERTIFICATE_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.DOTALL)

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a PEM private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|PuTTY-User-Key-File")),
    ("a JWT (a bearer token)", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}")),
    ("an AWS access key ID", re.compile(r"(?<![A-Z0-9])(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])")),
    ("a GitHub token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"\b(xox[abposr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})")),
    ("a Slack webhook URL", re.compile(r"hooks\.slack\.com/services/[A-Za-z0-9/]{20,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("an HCP Terraform token", re.compile(r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{20,}")),
    ("a Vault token", re.compile(r"\bhv[sbr]\.[A-Za-z0-9_-]{20,}")),
    ("an npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}")),
    ("a Stripe key", re.compile(r"\b[sr]k_(live|test)_[0-9A-Za-z]{16,}")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{8,}=*")),
    ("an Authorization header", re.compile(r"(?i)\bauthorization\s*[:=]\s*\S{8,}")),
    ("a URL with a password in it", re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@")),
    (
        "a URL carrying a credential in its query",
        re.compile(r"(?i)[?&](access_token|token|api_?key|password|x-amz-signature|sig)=[^&\s]{6,}"),
    ),
)
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_RANDOM_RUN = re.compile(r"[A-Za-z0-9+/=_-]{32,}")
_SEGMENT = re.compile(r"[^/_.:-]+")


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _mixed(text: str) -> bool:
    return any(c.isupper() for c in text) and any(c.islower() for c in text) and any(c.isdigit() for c in text)


def _longest_segment(text: str) -> int:
    return max((len(s) for s in _SEGMENT.findall(text)), default=0)


def _decoded_pem(text: str) -> str | None:
    """What a base64 run decodes to when it is an encoded PEM block (certificate bundles are public)."""
    if not text.startswith("LS0t"):
        return None
    try:
        decoded = base64.b64decode(text + "=" * (-len(text) % 4), validate=False).decode("ascii", "replace")
    except (binascii.Error, ValueError):
        return None
    return decoded if decoded.startswith("-----BEGIN") else None


@dataclass(frozen=True)
class Credential:
    kind: str
    """What it looks like, for the message: "a JWT", "an AWS secret access key", ..."""
    text: str
    """The matched text: only for redacting it from other messages, never to print."""


# Memoized (by the string only: the result depends on nothing else, and a Credential is frozen): the same
# keys, product and offering names recur in every cluster file of a fleet, and a check costs ~18 regex searches.
@functools.lru_cache(maxsize=4096)
def credential_in(value: str) -> Credential | None:
    """The first credential-looking part of `value` (PEM certificates, which are public, are skipped)."""
    text = _CERTIFICATE_BLOCK.sub(" ", value)
    for kind, pattern in _PATTERNS:
        match = pattern.search(text)
        if match:
            return Credential(kind, match.group(0))
    for match in _AWS_SECRET.finditer(text):
        token = match.group(0)
        if _mixed(token) and _entropy(token) >= 4.2 and _longest_segment(token) >= 12:
            return Credential("an AWS secret access key (40 random characters)", token)
    for match in _RANDOM_RUN.finditer(text):
        token = match.group(0).rstrip("=")
        pem = _decoded_pem(token)
        if pem is not None:
            if "PRIVATE KEY" in pem:
                return Credential("a base64-encoded PEM private key", match.group(0))
            continue
        if _mixed(token) and _entropy(token) >= 4.0 and _longest_segment(token) >= 16:
            return Credential("a long random string (a key or token)", match.group(0))
    return None


# --- Names ---------------------------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_SECRET_WORDS = {"password", "passwd", "pass", "passphrase", "token", "secret", "credential", "bearer"}
_SECRET_ENDINGS = ("password", "passwd", "token", "secret", "apikey", "accesskey", "secretkey", "privatekey")
_KEY_QUALIFIERS = {"access", "secret", "private", "api", "client", "signing", "encryption", "master", "account"}

LITERAL_CREDENTIAL_KEYS = ("token", "bearerToken", "clientKey", "clientCertificate", "password", "username")
"""Keys of a kubeconfig user that carry a credential; refused under `access` (see definition.py)."""


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or values key is named like a credential.

    `AWS_SECRET_ACCESS_KEY`, `--token`, `apiKey`, `clientSecret` are; names that point at a credential kept
    elsewhere are not: `AZURE_FEDERATED_TOKEN_FILE`, `--token-cache-dir`, `secretName`, `existingSecret`,
    `imagePullSecrets` (a list of Secret names).
    """
    words = [w.lower() for w in _WORD.findall(name)]
    if not words or words[0] == "existing":
        return False
    last = words[-1]
    if last in _SECRET_WORDS or last.endswith(_SECRET_ENDINGS):
        return True
    return last == "key" and len(words) > 1 and words[-2] in _KEY_QUALIFIERS


_FLAG = re.compile(r"^--?([A-Za-z][A-Za-z0-9_-]*)(=.*)?$", re.DOTALL)


def credential_flag(arg: str) -> str | None:
    """`--token` for `--token`, `--token=...`, `--client-secret ...`: a flag that takes a credential."""
    match = _FLAG.match(arg)
    if match and is_secret_name(match.group(1)):
        return f"--{match.group(1)}" if arg.startswith("--") else f"-{match.group(1)}"
    return None


# --- Documents -----------------------------------------------------------------------------------------------

_NEVER = "a credential never belongs in this file: it would be written to cdktf.out and the Terraform state"
EXEC_ALTERNATIVE = (
    "let the exec plugin fetch or read it at run time instead: export it in the environment Terraform runs in "
    "(the plugin inherits it), or point the plugin at a file (e.g. --token-file), e.g. "
    "exec: {command: aws, args: [eks, get-token, --cluster-name, NAME]}"
)
_ADVICE = {
    "exec": EXEC_ALTERNATIVE,
    "access": "use access.kubeconfig (path and context) or access.api.exec, an exec credential plugin",
    "backend": "give the backend its credentials through its environment variables (AWS_*, GOOGLE_*, ARM_*, "
    "TF_HTTP_USERNAME/TF_HTTP_PASSWORD) or `terraform login`",
    "values": "keep it in a Kubernetes Secret and give the chart the Secret's name (e.g. secretName, "
    "imagePullSecrets)",
    "catalog": "remove it: catalog text is published to Waldur, Kubeflow, the gpuLabel list and the ConfigMap",
    "other": "remove it and give it to whatever needs it at run time (environment variable, Kubernetes Secret)",
}


def _advice(path: Path, catalog: bool) -> str:
    if catalog:
        return _ADVICE["catalog"]
    top = path[0] if path else ""
    if path[:3] == ("access", "api", "exec"):
        return _ADVICE["exec"]
    if top in ("access", "backend"):
        return _ADVICE[str(top)]
    if len(path) > 1 and top in ("gpuOperator", "draDriver") and path[1] == "values":
        return _ADVICE["values"]
    return _ADVICE["other"]


@dataclass(frozen=True)
class Finding:
    path: Path
    message: str
    secret: str | None
    """The text to redact from every other message (None when only a name gave it away)."""


def _get(data: Any, *keys: str) -> Any:
    """data[k1][k2]... of a parsed document, or None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _walk(data: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    """Every node under `data` with its path, parents before children, in document order."""
    # A stack, not nested generators: each item would pass up through one generator per level.
    stack = [(path, data)]
    while stack:
        path, data = stack.pop()
        yield path, data
        if isinstance(data, Mapping):
            children = [((*path, k if isinstance(k, str | int) else str(k)), v) for k, v in data.items()]
        elif isinstance(data, list | tuple):
            children = [((*path, index), value) for index, value in enumerate(data)]
        else:
            continue
        stack.extend(reversed(children))


def _named_secrets(values: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """Helm values: a literal under a key named like a credential, or an env entry {name: TOKEN, value: ...}."""
    for where, node in _walk(values, path):
        if not isinstance(node, Mapping):
            continue
        name, value = node.get("name"), node.get("value")
        if isinstance(name, str) and is_secret_name(name) and _literal(value):
            yield (*where, "value"), f"environment entry {name} has a literal value"
        for key, item in node.items():
            if isinstance(key, str) and is_secret_name(key) and _literal(item):
                yield (*where, key), f"{key} is named like a credential and holds a literal value"


def _literal(value: Any) -> bool:
    return (isinstance(value, str) and value.strip() != "") or (
        isinstance(value, int | float) and not isinstance(value, bool)
    )


def find_secrets(document: Any, catalog: bool = False) -> list[Finding]:
    """Every credential in a parsed catalog (`catalog=True`) or cluster definition, one finding per place."""
    findings: dict[Path, Finding] = {}

    def add(path: Path, what: str, secret: str | None) -> None:
        if path not in findings:
            advice = _advice(path, catalog)
            findings[path] = Finding(path, f"{what}; {_NEVER}. {advice[0].upper()}{advice[1:]}", secret)

    if not catalog:
        args = _get(document, "access", "api", "exec", "args")
        for index, arg in enumerate(args if isinstance(args, list) else []):
            flag = credential_flag(arg) if isinstance(arg, str) else None
            if flag is not None:
                add(
                    ("access", "api", "exec", "args", index),
                    f"{flag} passes a credential on the command line",
                    None,
                )
        env = _get(document, "access", "api", "exec", "env")
        for name in env if isinstance(env, Mapping) else {}:
            if isinstance(name, str) and is_secret_name(name):
                add(("access", "api", "exec", "env", name), f"{name} is named like a credential", None)
        for release in ("gpuOperator", "draDriver"):
            for path, what in _named_secrets(_get(document, release, "values"), (release, "values")):
                add(path, what, None)

    for path, node in _walk(document, ()):
        if not catalog and path[:1] == ("access",) and len(path) <= 3 and path[-1] in LITERAL_CREDENTIAL_KEYS:
            continue  # the model refuses these keys outright, with the exec alternative (definition.py)
        if isinstance(node, str):
            found = credential_in(node)
            if found is not None:
                add(path, f"looks like {found.kind}", found.text)
        elif isinstance(node, Mapping):
            for key in node:
                found = credential_in(key) if isinstance(key, str) else None
                if found is not None:  # reported at the mapping: the key itself must not be shown
                    add(path, f"a key here looks like {found.kind}", found.text)
    return list(findings.values())
