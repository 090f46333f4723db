# The README's two commands are `make synth` and `make test`; both install what is missing first.
# Installing is scripts/setup.sh's job alone (pipenv in .tools/venv, packages in .venv, npm packages in
# node_modules; the system Python is never changed); every other target runs the tools from .venv/bin.
SHELL := /bin/bash
export PIPENV_VENV_IN_PROJECT := 1
export PIPENV_NOSPIN := 1
export PIPENV_VERBOSITY := -1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CHECKPOINT_DISABLE := 1
VENV := .venv/bin

.PHONY: setup synth synth-python validate test lint snapshots bench schemas lock

# The only target that installs Python packages; scripts/setup.sh takes a lock, so `make -j` cannot race it.
.venv/.synced: Pipfile.lock
	@scripts/setup.sh python

node_modules/.synced: package-lock.json
	@scripts/setup.sh node

setup: .venv/.synced node_modules/.synced

# Main job: synthesize the fleet in catalog/ and stacks/ with the CDKTF CLI, as GitOps pipelines do.
synth: setup
	npx cdktf synth

# The same synthesis without the CDKTF CLI (what the CLI runs, per cdktf.json).
synth-python: .venv/.synced
	$(VENV)/python main.py

# Check the catalog and every cluster definition; writes nothing.
validate: .venv/.synced
	$(VENV)/python -m themelio_gpu validate

lint: .venv/.synced
	$(VENV)/ruff check .
	$(VENV)/ruff format --check .
	$(VENV)/mypy

test: lint
	$(VENV)/pytest

# Records the reviewed snapshots again: your fleet's (tests/snapshots/user-fleet: one per cluster in
# stacks/, and the snapshots of clusters that are gone are removed) and the fixture fleet's
# (tests/snapshots/fixture-fleet). Read `git diff tests/snapshots` before committing.
snapshots: .venv/.synced
	$(VENV)/pytest -q --update-snapshots tests/test_user_fleet.py tests/test_stacks.py tests/test_contracts.py
	@git status --short tests/snapshots 2>/dev/null || true

schemas: .venv/.synced
	$(VENV)/python -m themelio_gpu schema

bench: .venv/.synced
	$(VENV)/python scripts/benchmark.py

lock:
	./scripts/lock.sh
