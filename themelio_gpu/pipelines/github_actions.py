"""A GitHub Actions workflow for the fleet: synthesize, `changed` against the base, then one Terraform (or
OpenTofu) job per changed stack: init and plan on pull requests, with the plan as the job's summary; init,
plan and apply on pushes to the main branch.

- the base of a pull request is its base commit, of a push the commit before it (`changed --base-ref`: the
  base's fleet synthesized by the base's own code); a manual run (workflow_dispatch) plans every stack, or
  those changed since the commit it is given;
- applies of one stack never run at once (one concurrency group per stack, queued, never cancelled); a pull
  request's plans of a stack are one group per stack and pull request, a newer push cancelling the older;
- the base commit's synthesis (cdktf.out with its record), kept by that commit's own run under a cache key of
  the commit and the tool's files, is restored before the synthesis: only the stacks whose inputs changed are
  synthesized, and `changed` compares with that folder; a cache miss costs one full synthesis, `changed`
  then reads the base from its commit (`--base-ref`), and the job's summary says which it was;
- one provider plugin cache, restored per job (the stacks pin every provider exactly);
- a dangerous change (docs/changed.md) fails the pull request's `dangerous` job unless the pull request is
  labelled `allow-dangerous`; once merged it is applied.

Written from a template: the fleet's paths, the main branch and the Terraform distribution go in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from themelio_gpu.pipelines.generated_file import engine_env, header

COMMAND = "github-actions"
DEFAULT_OUTPUT = ".github/workflows/themelio-gpu-stacks.yml"
ALLOW_DANGEROUS_LABEL = "allow-dangerous"
NO_STACKS = '{"include":[]}'
NO_COMMIT = "0" * 40
"""What GitHub gives as the commit before a branch's first push."""
KEY = "themelio-gpu-stacks-${{ runner.os }}-py${{ steps.python.outputs.python-version }}"
"""The start of the kept synthesis's cache key; the commit and the tool's files follow (docs/pipelines.md)."""
CODE_FILES = (
    "main.py",
    *(f"themelio_gpu/**/*{suffix}" for suffix in (".py", ".js", ".json")),  # not the .pyc a run leaves there
    "Pipfile.lock",
    "package-lock.json",
)
"""The tool's files in the cache key: those of TOOL_INPUTS that incremental synthesis counts as the tool
(outputs/stack_inputs.code_digest), as they are before a run and after it."""
TOOL_HASH = "${{ hashFiles(" + ", ".join(f"'{path}'" for path in CODE_FILES) + ") }}"


@dataclass(frozen=True)
class Distribution:
    binary: str
    setup: str
    version_input: str
    wrapper_input: str
    version: str


DISTRIBUTIONS = {
    # The version this project's CI runs; the stacks need 1.10 at most (the S3 backend's use_lockfile).
    "terraform": Distribution(
        "terraform", "hashicorp/setup-terraform@v3", "terraform_version", "terraform_wrapper", "1.11.4"
    ),
    # OpenTofu has S3-native locking from 1.10 too.
    "tofu": Distribution("tofu", "opentofu/setup-opentofu@v1", "tofu_version", "tofu_wrapper", "1.10.10"),
}

_TEMPLATE = """\
name: GPU stacks

on:
  pull_request:
    types: [opened, synchronize, reopened, labeled, unlabeled]
  push:
    branches: [@BRANCH@]
  workflow_dispatch:
    inputs:
      base:
        description: Plan (and on @BRANCH@ apply) the stacks changed since this commit; empty for every stack
        required: false
        default: ""

permissions:
  contents: read

env:
  JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION: "20"
  CHECKPOINT_DISABLE: "1"
@ENGINE_ENV@
jobs:
  changed:
    name: Stacks this change touches
    runs-on: ubuntu-latest
    outputs:
      matrix: ${{ steps.changed.outputs.matrix }}
      dangerous: ${{ steps.changed.outputs.dangerous }}
    env:
      # The commit the change is compared with: a pull request's base, the commit before a push, a manual
      # run's input (none: every stack is planned).
      BASE: ${{ github.event_name == 'pull_request' && github.event.pull_request.base.sha || github.event_name == 'push' && github.event.before || inputs.base }}
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0 # changed --base-ref reads the base commit
      - uses: actions/setup-python@v5
        id: python
        with:
          python-version: "3.11"
      - uses: actions/setup-node@v4 # jsii runs the synthesis in node
        with:
          node-version: "20"
      - uses: actions/cache@v4
        with:
          path: |
            .venv
            .tools
          key: themelio-venv-${{ runner.os }}-${{ steps.python.outputs.python-version }}-${{ hashFiles('Pipfile.lock', 'scripts/setup.sh') }}
      - name: Install the locked Python packages
        run: scripts/setup.sh python
      # The base commit's synthesis, as its own run kept it (below): the key names the commit and the tool's
      # files, so it holds exactly what that commit's tool synthesized from that commit's fleet.
      - name: Restore the base commit's synthesis
        id: kept
        if: env.BASE != '' && env.BASE != '@NO_COMMIT@'
        uses: actions/cache/restore@v4
        with:
          path: cdktf.out
          key: @KEY@-${{ env.BASE }}-@TOOL_HASH@
      - name: Synthesize
        env:
          KEPT: ${{ steps.kept.outputs.cache-hit }}
        run: |
          # With the base's synthesis restored, only the stacks whose inputs changed are synthesized (its record
          # says which); it stays whole beside, for the comparison.
          if [ "$KEPT" = "true" ]; then rm -rf "$RUNNER_TEMP/base.out" && cp -R cdktf.out "$RUNNER_TEMP/base.out"; fi
          .venv/bin/python main.py @INPUTS@ --quiet
      - name: Compare with the base
        id: changed
        env:
          KEPT: ${{ steps.kept.outputs.cache-hit }}
        run: |
          # No base (a manual run without one, the first push of the branch): every stack is planned.
          if [ -z "$BASE" ] || [ "$BASE" = "@NO_COMMIT@" ]; then
            mkdir -p "$RUNNER_TEMP/no-stacks"
            base=(--base "$RUNNER_TEMP/no-stacks")
            how="no base commit: every stack synthesized and planned"
          elif [ "$KEPT" = "true" ]; then
            base=(--base "$RUNNER_TEMP/base.out")
            how="cache hit: the synthesis of $BASE, kept by its own run, is the base; only the stacks whose inputs changed were synthesized"
          else
            base=(--base-ref "$BASE")
            how="cache miss (nothing kept for $BASE with this tool): the whole fleet was synthesized, and the base read from its commit"
          fi
          status=0
          .venv/bin/python -m themelio_gpu changed @INPUTS@@SKIP@ "${base[@]}" --head cdktf.out \\
            --format text=changed.txt --format github-matrix=matrix.json --fail-on dangerous || status=$?
          if [ "$status" -gt 1 ]; then exit "$status"; fi
          if [ "$status" -eq 1 ]; then echo "dangerous=true" >> "$GITHUB_OUTPUT"; else echo "dangerous=false" >> "$GITHUB_OUTPUT"; fi
          echo "matrix=$(cat matrix.json)" >> "$GITHUB_OUTPUT"
          { echo "### Stacks this change touches"; echo; echo "Synthesis: $how."; echo; echo '```'; cat changed.txt; echo '```'; } >> "$GITHUB_STEP_SUMMARY"
      # The next changes based on this commit start from its synthesis.
      - name: Keep this commit's synthesis
        if: github.event_name != 'pull_request' && github.ref == 'refs/heads/@BRANCH@'
        uses: actions/cache/save@v4
        with:
          path: cdktf.out
          key: @KEY@-${{ github.sha }}-@TOOL_HASH@
      - uses: actions/upload-artifact@v4
        with:
          name: stacks
          path: cdktf.out/stacks
          retention-days: 7

  dangerous:
    name: No dangerous change without the @LABEL@ label
    if: github.event_name == 'pull_request'
    needs: changed
    runs-on: ubuntu-latest
    steps:
      - name: Refuse a change that would hurt a running cluster
        if: needs.changed.outputs.dangerous == 'true' && !contains(github.event.pull_request.labels.*.name, '@LABEL@')
        run: |
          echo "::error::This change would hurt a running cluster: the summary of the changed job says what and why. Label the pull request @LABEL@ to go ahead."
          exit 1

  terraform:
    name: ${{ matrix.stack }}
    needs: changed
    if: needs.changed.outputs.matrix != '@NO_STACKS@'
    runs-on: ubuntu-latest
    strategy:
      fail-fast: false
      matrix: ${{ fromJSON(needs.changed.outputs.matrix) }}
    # Applies of one stack queue behind each other and are never cancelled; a pull request's newer plan of
    # a stack cancels its older one.
    concurrency:
      group: ${{ github.event_name == 'pull_request' && format('gpu-stacks-plan-{0}-{1}', matrix.stack, github.event.pull_request.number) || format('gpu-stacks-{0}', matrix.stack) }}
      cancel-in-progress: ${{ github.event_name == 'pull_request' }}
    env:
      STACK: ${{ matrix.stack }}
      TF_IN_AUTOMATION: "1"
      TF_INPUT: "0"
      TF_PLUGIN_CACHE_DIR: ${{ github.workspace }}/.terraform-plugin-cache
      # The stack folders are synthesized, so they hold no lock file; without this the cache is never used.
      # Every stack pins its providers' exact versions.
      TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE: "true"
      # The state backends' and clusters' credentials come from here too: add them (OIDC, secrets).
    steps:
      - uses: actions/checkout@v4
      - uses: actions/download-artifact@v4
        with:
          name: stacks
          path: cdktf.out/stacks
      - uses: @SETUP@
        with:
          @VERSION_INPUT@: "@VERSION@"
          @WRAPPER_INPUT@: false
      - uses: actions/cache@v4
        with:
          path: ${{ github.workspace }}/.terraform-plugin-cache
          key: terraform-plugins-${{ runner.os }}-${{ hashFiles('Pipfile.lock') }}
      - name: @BINARY@ init
        working-directory: cdktf.out/${{ matrix.directory }}
        run: |
          mkdir -p "$TF_PLUGIN_CACHE_DIR"
          @BINARY@ init -input=false
      - name: @BINARY@ plan
        working-directory: cdktf.out/${{ matrix.directory }}
        run: |
          @BINARY@ plan -input=false -lock-timeout=10m -out=tfplan
          { echo "### $STACK: @BINARY@ plan"; echo; echo '```'; @BINARY@ show -no-color tfplan | head -c 1000000; echo '```'; } >> "$GITHUB_STEP_SUMMARY"
      - name: @BINARY@ apply
        if: github.event_name != 'pull_request' && github.ref == 'refs/heads/@BRANCH@'
        working-directory: cdktf.out/${{ matrix.directory }}
        run: @BINARY@ apply -input=false -lock-timeout=10m tfplan
"""


def workflow_text(inputs: str, branch: str, distribution: str, skipped: Sequence[str] = ()) -> str:
    """`inputs`: the `--catalog X --stacks-dir Y` flags, as the repository root sees the fleet; `skipped`: the
    stacks the workflow never plans (their state is local)."""
    tool = DISTRIBUTIONS[distribution]
    text = _TEMPLATE
    for token, value in (
        ("@ENGINE_ENV@\n", engine_env("  {name}: {value}\n")),
        ("@INPUTS@", inputs),
        ("@SKIP@", "".join(f" --skip-stack {name}" for name in skipped)),
        ("@BRANCH@", branch),
        ("@LABEL@", ALLOW_DANGEROUS_LABEL),
        ("@NO_STACKS@", NO_STACKS),
        ("@NO_COMMIT@", NO_COMMIT),
        ("@KEY@", KEY),
        ("@TOOL_HASH@", TOOL_HASH),
        ("@SETUP@", tool.setup),
        ("@VERSION_INPUT@", tool.version_input),
        ("@WRAPPER_INPUT@", tool.wrapper_input),
        ("@VERSION@", tool.version),
        ("@BINARY@", tool.binary),
    ):
        text = text.replace(token, value)
    intro = header(
        COMMAND,
        "",
        "Pull requests: synthesize the fleet (from the base commit's synthesis, kept by its run, when the cache",
        "has it), list the stacks the change touches (`changed` against the base commit's fleet, synthesized by",
        "the base's own code), then one job per touched stack: init and plan, the plan as the job's summary.",
        f"Pushes to {branch}: the same, then apply, and the synthesis is kept. See docs/pipelines.md.",
    )
    return intro + "\n" + text
