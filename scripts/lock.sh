#!/usr/bin/env bash
# Re-lock the Python dependencies, then strip the registry address pipenv writes into
# _meta.sources (pipenv defaults to PyPI; `pipenv sync` and `pipenv verify` still pass).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh tools # pipenv, pinned, in .tools/venv
PIPENV_VENV_IN_PROJECT=1 .tools/venv/bin/pipenv lock
python3 - <<'PY'
import json
from pathlib import Path
lock = Path("Pipfile.lock")
data = json.loads(lock.read_text())
data["_meta"]["sources"] = []
lock.write_text(json.dumps(data, indent=4, sort_keys=True) + "\n")
PY
