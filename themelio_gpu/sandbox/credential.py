"""An exec credential plugin for the sandbox: prints the client certificate of the sandbox's kubeconfig.

A cluster reached by host and exec plugin (`access.api`, e.g. `aws eks get-token`) gets this plugin in the
sandbox instead, through the stack's Terraform override file: the providers run it as they would run the
real one, and it answers with an ExecCredential holding the sandbox's admin certificate and key.
Usage: python -m themelio_gpu.sandbox.credential KUBECONFIG API_VERSION
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml


def credential(kubeconfig: Path, api_version: str) -> dict[str, object]:
    user = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]
    return {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "status": {
            "clientCertificateData": Path(user["client-certificate"]).read_text(),
            "clientKeyData": Path(user["client-key"]).read_text(),
        },
    }


if __name__ == "__main__":
    print(json.dumps(credential(Path(sys.argv[1]), sys.argv[2])))
