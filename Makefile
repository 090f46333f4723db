# The README's two commands are `make synth` and `make test`; both install what is missing first.
SHELL := /bin/bash
export PIPENV_VENV_IN_PROJECT := 1
export PIPENV_NOSPIN := 1
export PIPENV_VERBOSITY := -1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CHECKPOINT_DISABLE := 1
PIPENV := $(shell command -v pipenv 2>/dev/null || echo python3 -m pipenv)

.PHONY: setup synth synth-python test lint snapshots bench schemas lock render-gpucluster verify verify-fixtures terraform-check

.venv/.synced: Pipfile.lock
	@command -v pipenv >/dev/null 2>&1 || python3 -m pipenv --version >/dev/null 2>&1 || python3 -m pip install --quiet pipenv
	$(PIPENV) sync --dev
	@touch $@

node_modules/.synced: package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

setup: .venv/.synced node_modules/.synced

# Main job: synthesize the example fleet with the CDKTF CLI, as GitOps pipelines do.
synth: setup
	npx cdktf synth

# The same synthesis without the CDKTF CLI (what the CLI runs, per cdktf.json).
synth-python: .venv/.synced
	$(PIPENV) run python main.py

lint: .venv/.synced
	$(PIPENV) run ruff check .
	$(PIPENV) run ruff format --check .
	$(PIPENV) run mypy

test: lint
	$(PIPENV) run pytest

# The GPUCluster mode rendered with the real gpu-operator v26.7.0 chart (needs helm and ../shared/reference/charts).
render-gpucluster: .venv/.synced
	$(PIPENV) run pytest tests/test_gpu_operator_mode_render.py

# Rewrites the snapshot files; read `git diff tests/snapshots` before committing.
snapshots: .venv/.synced
	$(PIPENV) run pytest --update-snapshots tests/test_stacks.py tests/test_contracts.py

# Renders the real NVIDIA charts (helm on PATH) with each example cluster's values and proves every
# operand's placement on every GPU pool (README "verify").
verify: .venv/.synced
	$(PIPENV) run python -m themelio_gpu verify --charts ../shared/reference/charts

# The same on every fixture fleet: each must pass, except breaking-overrides, which must fail.
verify-fixtures: .venv/.synced
	@out=$$(mktemp); for fleet in tests/fixtures/fleets/*/; do \
	  case $$fleet in *breaking-*) want=1 ;; *) want=0 ;; esac; \
	  status=0; $(PIPENV) run python -m themelio_gpu verify --catalog $${fleet}catalog/gpu-catalog.yaml \
	    --stacks-dir $${fleet}stacks --charts ../shared/reference/charts > $$out 2>&1 || status=$$?; \
	  echo "$$fleet: $$(tail -n 1 $$out)"; \
	  if [ $$status -ne $$want ]; then cat $$out; echo "$$fleet: verify exited $$status, expected $$want"; \
	    rm -f $$out; exit 1; fi; \
	done; rm -f $$out

# Real Terraform on every stack: init (no backend), validate, plan with the backend removed. Providers come
# from wherever your Terraform gets them (the registry, or a mirror in TF_CLI_CONFIG_FILE). Pass options in
# ARGS, e.g. `make terraform-check ARGS="--outdir cdktf.out"` or `ARGS="--cluster gpu-east --no-plan"`.
terraform-check: .venv/.synced
	$(PIPENV) run python -m themelio_gpu terraform-check $(ARGS)

schemas: .venv/.synced
	$(PIPENV) run python -m themelio_gpu schema

bench: .venv/.synced
	$(PIPENV) run python scripts/benchmark.py

lock:
	./scripts/lock.sh
