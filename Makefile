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

.PHONY: sandbox-tools sandbox-check sandbox-check-fixtures day-two probe-mutations teardown-kills setup synth synth-python validate test check-fleet lint snapshots bench bench-pull-request schemas lock render-gpucluster charts charts-all verify verify-fixtures terraform-check terraform-check-fixtures

# The only target that installs Python packages; scripts/setup.sh takes a lock, so `make -j` cannot race it.
.venv/.synced: Pipfile.lock
	@scripts/setup.sh python

node_modules/.synced: package-lock.json
	@scripts/setup.sh node

setup: .venv/.synced node_modules/.synced

# Main job: synthesize the fleet in catalog/ and stacks/ with the CDKTF CLI, as GitOps pipelines do. Without a
# terminal (a log file, a pipeline) the CLI's spinner and colours would be escape codes: its renderer draws only
# the final lines when CI is set, and FORCE_COLOR=0 turns the colours off (either left alone when already set).
synth: setup
	@if [ -t 1 ]; then npx cdktf synth; else CI=$${CI:-true} FORCE_COLOR=$${FORCE_COLOR:-0} npx cdktf synth; fi

# The same synthesis without the CDKTF CLI (what the CLI runs, per cdktf.json).
synth-python: .venv/.synced
	$(VENV)/python main.py

# Check the catalog and every cluster definition; writes nothing.
validate: .venv/.synced
	$(VENV)/python -m themelio_gpu validate

# lint-imports: the package's layers (pyproject.toml [tool.importlinter]): no import goes up, none makes a cycle.
lint: .venv/.synced
	$(VENV)/ruff check .
	$(VENV)/ruff format --check .
	$(VENV)/mypy
	$(VENV)/lint-imports --no-logo

# --durations: the slowest tests, named at the end of every run (where CI's time goes).
test: lint node_modules/.synced
	$(VENV)/pytest --durations=25

# Every mutation of the sandbox probe's mutation suite (tests/test_probe_mutations.py; `make test` runs a covering
# slice of them): each breaks one thing on a real sandbox and must fail exactly its own rows. docs/sandbox.md.
probe-mutations: .venv/.synced
	THEMELIO_EVERY_MUTATION=1 $(VENV)/pytest -q tests/test_probe_mutations.py

# Issue 43's measure of teardown: 20 kill -9 tries at random moments of up, apply, probe and check --jobs, each
# followed by down, which must leave no process and no folder (`make test` runs 10 of them). docs/sandbox.md.
teardown-kills: .venv/.synced
	THEMELIO_EVERY_KILL=1 $(VENV)/pytest -q -s tests/test_sandbox_teardown.py -k kill_9_at_a_random_moment

# The tests that follow your fleet (catalog/ and stacks/): its reviewed snapshots, contract files and schemas.
# Seconds, where `make test` (the tool's own tests too) takes minutes: the README's edit loop runs this.
check-fleet: .venv/.synced
	$(VENV)/pytest -q tests/test_user_fleet.py

# The GPUCluster mode rendered with the real gpu-operator v26.7.0 chart (a test: needs helm and ../shared/reference/charts).
render-gpucluster: .venv/.synced
	$(VENV)/pytest tests/test_gpu_operator_mode_render.py


# Records the reviewed snapshots again: your fleet's (tests/snapshots/user-fleet: one per cluster in
# stacks/, and the snapshots of clusters that are gone are removed) and the fixture fleet's
# (tests/snapshots/fixture-fleet, with the local-charts fixture's stack), and the trial of the capability
# fixture (tests/snapshots/trial). It ends with every snapshot file it added, changed or removed: read each
# before committing.
snapshots: .venv/.synced
	$(VENV)/pytest -q --update-snapshots tests/test_user_fleet.py tests/test_stacks.py tests/test_contracts.py tests/test_trial.py tests/test_local_charts.py

# The chart versions your clusters pin, into the chart cache (.cache/charts) with `helm pull` from NVIDIA's
# repositories; `make charts CHARTS_FROM=DIR` copies them from a folder of <chart>-<version> chart folders
# instead (CI: CHARTS_FROM=../shared/reference/charts). `charts-all`: every version with a known-values table.
CHARTS_FROM ?=
charts: .venv/.synced
	$(VENV)/python -m themelio_gpu charts fetch $(if $(CHARTS_FROM),--from $(CHARTS_FROM))

charts-all: .venv/.synced
	$(VENV)/python -m themelio_gpu charts fetch --all-known $(if $(CHARTS_FROM),--from $(CHARTS_FROM))

# Renders the real NVIDIA charts (helm on PATH) from the chart cache with each cluster's values and proves
# every operand's placement on every GPU pool (docs/verify.md).
verify: charts
	$(VENV)/python -m themelio_gpu verify

# The same on every fixture fleet: each must pass, except breaking-overrides, which must fail.
verify-fixtures: charts-all
	@out=$$(mktemp); for fleet in tests/fixtures/fleets/*/; do \
	  case $$fleet in *breaking-*) want=1 ;; *) want=0 ;; esac; \
	  status=0; $(VENV)/python -m themelio_gpu verify --catalog $${fleet}catalog/gpu-catalog.yaml \
	    --stacks-dir $${fleet}stacks > $$out 2>&1 || status=$$?; \
	  echo "$$fleet: $$(tail -n 1 $$out)"; \
	  if [ $$status -ne $$want ]; then cat $$out; echo "$$fleet: verify exited $$status, expected $$want"; \
	    rm -f $$out; exit 1; fi; \
	done; rm -f $$out

# Real Terraform on every stack: init (no backend), validate, plan with the backend removed. Providers come
# from wherever your Terraform gets them (the registry, or a mirror in TF_CLI_CONFIG_FILE). Pass options in
# ARGS, e.g. `make terraform-check ARGS="--outdir cdktf.out"` or `ARGS="--cluster gpu-east --no-plan"`.
terraform-check: .venv/.synced
	$(VENV)/python -m themelio_gpu terraform-check $(ARGS)

# The same on every fixture fleet of the tests (every backend, access kind, pool kind, chart and mode), in one run
# (each stack reported as <fleet>/<cluster>).
terraform-check-fixtures: .venv/.synced
	$(VENV)/python -m themelio_gpu terraform-check $(foreach fleet,$(wildcard tests/fixtures/fleets/*/),--fleet $(fleet)) $(ARGS)

schemas: .venv/.synced
	$(VENV)/python -m themelio_gpu schema

bench: .venv/.synced
	$(VENV)/python scripts/benchmark.py
	$(VENV)/python scripts/sandbox_bench.py

# The pull request's review alone (`changed --base-ref` and the generated workflow's job at 1,000 clusters, with
# their goals; docs/performance.md): a few minutes instead of make bench's half hour.
bench-pull-request: .venv/.synced
	$(VENV)/python scripts/benchmark.py --only pull-request

lock:
	./scripts/lock.sh

# The sandbox's tools (Kubernetes, etcd, kwok, helm, OpenTofu, HashiCorp's providers), pinned in
# themelio_gpu/sandbox/tools.toml and built from their Go modules or from upstream source archives
# ($THEMELIO_SOURCE_ARCHIVES, else ../shared/sources) into ~/.cache/themelio-gpu/tools (needs Go 1.26); a built
# tool is not built again. docs/sandbox.md.
sandbox-tools: .venv/.synced
	$(VENV)/python -m themelio_gpu sandbox tools

# Every cluster of your fleet applied to a sandbox (up, apply, a second plan that must be empty, destroy,
# down): `make sandbox-check ARGS="--with tofu"` or `ARGS="--with cdktf"` to deploy another way.
# SANDBOX_JOBS clusters at once (default 2), each on a sandbox of its own.
SANDBOX_JOBS ?= 2
sandbox-check: charts
	$(VENV)/python -m themelio_gpu sandbox check --every --jobs $(SANDBOX_JOBS) $(ARGS)

# The same on every fixture fleet: in each, the fewest clusters that cover its pool kinds, DRA modes, chart
# versions, Kubernetes minors and served names (the command prints which and why), every fleet in one check.
sandbox-check-fixtures: charts-all
	$(VENV)/python -m themelio_gpu sandbox check --jobs $(SANDBOX_JOBS) \
	  $(foreach fleet,$(wildcard tests/fixtures/fleets/*/),--fleet $(fleet)) $(ARGS)

# Day two (docs/day-two.md): every scenario of tests/day_two.py upgraded one after the other on one sandbox
# (`sandbox upgrade`), each report written to bench-results/day-two.json (the doc's figures), and each fixture
# fleet that comes as a pair of revisions upgraded on a sandbox of its own (tests/test_fleet_pairs.py). `make
# test` runs the scenarios marked for CI only.
day-two: .venv/.synced
	mkdir -p bench-results
	THEMELIO_DAY_TWO=full THEMELIO_DAY_TWO_FIGURES=bench-results/day-two.json $(VENV)/pytest -q -s \
	  tests/test_day_two.py tests/test_fleet_pairs.py
