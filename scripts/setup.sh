#!/usr/bin/env bash
# Installs what the project needs, printing each step. `make` runs it (targets .venv/.synced and
# node_modules/.synced); run it by hand the same way:
#   scripts/setup.sh python   pipenv into .tools/venv (a private virtualenv), then the locked packages of
#                             Pipfile.lock into .venv with `pipenv sync --dev`
#   scripts/setup.sh tools    only pipenv into .tools/venv (scripts/lock.sh uses it)
#   scripts/setup.sh node     npm ci: cdktf-cli as pinned in package-lock.json, into node_modules
# The system Python is never changed: Debian's refuses pip (PEP 668, "externally managed"), and a shared
# interpreter must not be raced by two installs. Each install holds a lock (flock, .tools/*.lock) for its
# whole run, so `make -j` or two terminals wait for each other instead of installing into one folder at once.
# Environment: PYTHON (default python3) creates .tools/venv and, when set, is the Python of .venv too.
set -euo pipefail
cd "$(dirname "$0")/.."

CHOSEN_PYTHON=${PYTHON:-}
PYTHON=${PYTHON:-python3}
PIPENV_VERSION=2026.10.3
TOOLS=.tools
TOOLS_VENV=$TOOLS/venv
PIPENV_BIN=$TOOLS_VENV/bin/pipenv
export PIPENV_VENV_IN_PROJECT=1 PIPENV_NOSPIN=1 PIPENV_YES=1

say() { printf 'setup: %s\n' "$*"; }
fail() {
  printf 'setup: %s\n' "$*" >&2
  exit 1
}

# Hold $TOOLS/$1.lock until this script exits; wait (and say so) while another setup holds it.
hold_lock() {
  mkdir -p "$TOOLS"
  exec 9>"$TOOLS/$1.lock"
  command -v flock >/dev/null 2>&1 || return 0
  if ! flock -n 9; then
    say "another setup is installing $1 right now; waiting for it to finish"
    flock 9
  fi
}

# A stamp records what an install was made from: make's timestamps alone re-run it after a checkout.
stamp_of() { printf '%s sha256 %s\n' "$1" "$(sha256sum "$1" | cut -d' ' -f1)"; }

up_to_date() { [[ -f "$2" && "$(cat "$2")" == "$(stamp_of "$1")" ]]; }

tools() {
  if [[ -x $PIPENV_BIN ]] && [[ "$("$PIPENV_BIN" --version 2>/dev/null)" == *" $PIPENV_VERSION" ]]; then
    say "[1/3] pipenv $PIPENV_VERSION is ready in $TOOLS_VENV"
    return
  fi
  command -v "$PYTHON" >/dev/null 2>&1 ||
    fail "$PYTHON not found: install Python 3.11 (Debian 12: apt-get install python3 python3-venv)"
  say "[1/3] creating $TOOLS_VENV, a private virtualenv for pipenv $PIPENV_VERSION ($("$PYTHON" --version 2>&1); the system Python is not changed)"
  rm -rf "$TOOLS_VENV"
  if ! "$PYTHON" -m venv "$TOOLS_VENV" >"$TOOLS/venv.log" 2>&1; then
    cat "$TOOLS/venv.log" >&2
    rm -rf "$TOOLS_VENV"
    fail "$PYTHON cannot create a virtualenv (see above): its venv module or ensurepip is missing. On Debian and Ubuntu install python3-venv (as root: apt-get install python3-venv), then run make again"
  fi
  say "      installing pipenv==$PIPENV_VERSION into $TOOLS_VENV"
  if ! "$TOOLS_VENV/bin/python" -m pip install --disable-pip-version-check --no-input --quiet "pipenv==$PIPENV_VERSION"; then
    rm -rf "$TOOLS_VENV"
    fail "installing pipenv==$PIPENV_VERSION into $TOOLS_VENV failed (see above); nothing outside $TOOLS was changed"
  fi
}

# `.venv/bin/python -m themelio_gpu` from any folder (a fleet's own repository, a CI job's work folder): this
# checkout on the venv's import path, as an editable install would put it. Written on every run, so a moved
# checkout is found again.
import_path() {
  local site
  for site in .venv/lib/python3*/site-packages; do
    if [[ -d $site ]]; then printf '%s\n' "$PWD" >"$site/themelio-gpu-stacks.pth"; fi
  done
}

python_env() {
  if up_to_date Pipfile.lock .venv/.synced; then
    say ".venv is up to date with Pipfile.lock"
    touch .venv/.synced
    import_path
    return
  fi
  hold_lock python
  if up_to_date Pipfile.lock .venv/.synced; then # another setup finished while we waited
    say ".venv was brought up to date with Pipfile.lock meanwhile"
    touch .venv/.synced
    import_path
    return
  fi
  tools
  say "[2/3] pipenv sync --dev: the packages locked in Pipfile.lock into .venv (minutes the first time)"
  # pipenv finds a Python 3.11 for .venv itself (Pipfile [requires]); a PYTHON given by the user wins.
  if [[ -n $CHOSEN_PYTHON ]]; then export PIPENV_PYTHON=$CHOSEN_PYTHON; fi
  # Verbosity 0 (the Makefile silences pipenv elsewhere): its "Installing dependencies ..." lines are progress.
  LANG=${LANG:-C.UTF-8} PIPENV_VERBOSITY=0 "$PIPENV_BIN" sync --dev
  stamp_of Pipfile.lock >.venv/.synced
  import_path
  say "[3/3] .venv is ready: $(.venv/bin/python --version 2>&1), packages of Pipfile.lock"
}

node_env() {
  if up_to_date package-lock.json node_modules/.synced; then
    say "node_modules is up to date with package-lock.json"
    touch node_modules/.synced
    return
  fi
  hold_lock node
  if up_to_date package-lock.json node_modules/.synced; then
    say "node_modules was brought up to date meanwhile"
    touch node_modules/.synced
    return
  fi
  command -v npm >/dev/null 2>&1 || fail "npm not found: install Node.js 20 and npm (Debian 12: apt-get install nodejs npm)"
  say "[node] npm ci: cdktf-cli and its dependencies as locked in package-lock.json into node_modules"
  npm ci --no-audit --no-fund
  stamp_of package-lock.json >node_modules/.synced
  say "[node] node_modules is ready"
}

case "${1:-}" in
python) python_env ;;
tools)
  hold_lock python
  tools
  ;;
node) node_env ;;
*) fail "usage: scripts/setup.sh python|tools|node" ;;
esac
