"""Real Terraform on every synthesized stack: `terraform-check` on the example fleet and on the fixture fleet
that uses every backend, access kind and pool kind the schema allows (tests/fixtures/fleets/terraform).

Providers come from a filesystem mirror of schema-serving stand-ins (../shared/tools/terraform-schema-mirror),
built once per session, or from the terraformrc named by $THEMELIO_TF_CLI_CONFIG_FILE (faster: reuses one).
Without terraform or ../shared these tests skip with the reason; under CI=true they fail instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.checkout import checkout_paths
from tests.conftest import EXAMPLE_CLUSTERS, FIXTURES, ROOT, USER_FLEET_GUARD
from tests.requirements import binary, shared_path, unavailable
from themelio_gpu.cli import main
from themelio_gpu.inputs.clusters import definition as d
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import Fleet
from themelio_gpu.verify import terraform as tf

FLEET = FIXTURES / "fleets" / "terraform"
# Catalog-declared products and capability offerings must plan too.
CAPABILITY_FLEET = FIXTURES / "fleets" / "capability"
MIRROR_ENV = "THEMELIO_TF_CLI_CONFIG_FILE"


@pytest.fixture(scope="session")
def fixture_fleet() -> Fleet:
    return load_fleet(FLEET / "catalog" / "gpu-catalog.yaml", FLEET / "stacks")


@pytest.fixture(scope="session")
def terraform_cli_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary("terraform")
    given = os.environ.get(MIRROR_ENV)
    if given:
        if not Path(given).is_file():
            unavailable(f"${MIRROR_ENV}={given} is not a file")
        return Path(given)
    make_mirror = shared_path("tools", "terraform-schema-mirror", "make-mirror")
    result = subprocess.run(
        [str(make_mirror), str(tmp_path_factory.mktemp("terraform-mirror"))],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        unavailable(f"make-mirror failed (it installs grpcio and friends with pip): {result.stderr[-2000:]}")
    return Path(result.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def mirror_environment(cli_config: Path) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ["TF_CLI_CONFIG_FILE"] = str(cli_config)
    # The stand-ins (Python gRPC) refuse the plugin client certificate Terraform sends otherwise.
    os.environ["TF_DISABLE_PLUGIN_TLS"] = "1"
    for name in ("TF_PLUGIN_CACHE_DIR", tf.BINARY_ENV, "TF_CLI_ARGS", "TF_CLI_ARGS_plan"):
        os.environ.pop(name, None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    scratch_left: list[str]

    def line(self, stack: str) -> str:
        return next((x for x in self.out.splitlines() if x.startswith(f"{stack}: ")), "")


def run_check(args: list[str], cli_config: Path | None, scratch: Path) -> Run:
    """`python -m themelio_gpu terraform-check ARGS`, in this process, with temporary files under `scratch`."""
    out, err = io.StringIO(), io.StringIO()
    scratch.mkdir(parents=True, exist_ok=True)
    saved_tempdir = tempfile.tempdir
    tempfile.tempdir = str(scratch)
    environment = mirror_environment(cli_config) if cli_config else contextlib.nullcontext()
    try:
        with environment, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["terraform-check", *args])
    finally:
        tempfile.tempdir = saved_tempdir
    return Run(code, out.getvalue(), err.getvalue(), sorted(p.name for p in scratch.iterdir()))


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _terraform_leftovers(root: Path) -> list[str]:
    """What terraform init writes (.terraform/, .terraform.lock.hcl) anywhere in the checkout but the user's
    folders: cdktf.out, where they may run terraform, and their fleet (tests do not read it)."""
    skip = [root / "cdktf.out", *map(Path, USER_FLEET_GUARD.protected)]
    return sorted(p for p in checkout_paths(root, skip) if Path(p).name.startswith(".terraform"))


@pytest.fixture(scope="session")
def capability_fleet() -> Fleet:
    return load_fleet(CAPABILITY_FLEET / "catalog" / "gpu-catalog.yaml", CAPABILITY_FLEET / "stacks")


@pytest.fixture(scope="session")
def fixture_synthesized(
    fixture_fleet: Fleet, capability_fleet: Fleet, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    from themelio_gpu.outputs.synth import synthesize

    out = tmp_path_factory.mktemp("fixture-cdktf.out")
    synthesize(fixture_fleet, out, progress=None)
    capability_out = tmp_path_factory.mktemp("capability-cdktf.out")
    synthesize(capability_fleet, capability_out, progress=None)
    for name, folder in tf.stack_folders(capability_out).items():
        shutil.copytree(folder, out / "stacks" / name)
    return out


@pytest.fixture(scope="session")
def both_fleets(
    synthesized: Path,
    fixture_synthesized: Path,
    terraform_cli_config: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Run, dict[str, bytes]]:
    """One terraform-check over the example stacks and the fixture fleets' (terraform, capability), in parallel."""
    combined = tmp_path_factory.mktemp("both-fleets")
    for source in (synthesized, fixture_synthesized):
        for name, folder in tf.stack_folders(source).items():
            shutil.copytree(folder, combined / "stacks" / name)
    before = _files(combined)
    run = run_check(["--outdir", str(combined), "--jobs", "12"], terraform_cli_config, combined.parent / "scratch")
    assert _files(combined) == before, "terraform-check wrote into the folder it checked"
    return run, before


def test_fixture_fleet_uses_every_backend_access_and_pool_kind_the_schema_allows(fixture_fleet: Fleet) -> None:
    clusters = [c.definition for c in fixture_fleet.clusters]
    backend_union = typing.get_args(typing.get_args(d.Backend)[0])
    assert {type(c.backend) for c in clusters} == set(backend_union)
    s3 = [c.backend for c in clusters if isinstance(c.backend, d.S3Backend)]
    assert {(b.use_lockfile, b.dynamodb_table is not None) for b in s3} >= {(True, False), (False, True)}
    assert any(c.access.kubeconfig for c in clusters)
    assert {bool(c.access.api.exec.env) for c in clusters if c.access.api} == {True, False}
    pools = [p for c in clusters for p in c.node_pools]
    kinds = {name for p in pools for name in d.Provisioning.model_fields if getattr(p.provisioning, name)}
    assert kinds == set(d.Provisioning.model_fields)
    assert any(p.mig and p.mig.profile for p in pools) and any(p.mig and p.mig.provides for p in pools)
    assert any(p.mig and p.mig.config and not p.mig.provides for p in pools)
    assert any(not p.dra for p in pools) and any(p.taints == () for p in pools)
    assert any(
        c.dra_driver.chart == "nvidia-dra-driver-gpu" and c.dra_driver.version == "25.12.0" for c in clusters
    )
    assert any(c.catalog_config_map for c in clusters)
    assert any(not plan.dra_enabled for plan in fixture_fleet.clusters)


def test_example_stacks_init_validate_and_plan(both_fleets: tuple[Run, dict[str, bytes]]) -> None:
    run, _ = both_fleets
    for stack in EXAMPLE_CLUSTERS:
        line = run.line(stack)
        assert "init ok" in line and "validate ok" in line and "plan ok" in line and "to add" in line, run.out


def test_fixture_stacks_init_validate_and_plan(
    both_fleets: tuple[Run, dict[str, bytes]], fixture_fleet: Fleet, capability_fleet: Fleet
) -> None:
    run, _ = both_fleets
    assert run.code == 0, run.out + run.err
    fixtures = [*fixture_fleet.clusters, *capability_fleet.clusters]
    for plan in fixtures:
        line = run.line(plan.name)
        assert "init ok" in line and "validate ok" in line and "plan ok" in line and "to add" in line, run.out
    count = len(fixtures) + len(EXAMPLE_CLUSTERS)
    assert f"{count} stacks: {count} validated, {count} planned; all passed" in run.out


def test_terraform_check_leaves_nothing_behind(both_fleets: tuple[Run, dict[str, bytes]]) -> None:
    run, _ = both_fleets
    assert run.scratch_left == [], "scratch folders were not removed"
    assert _terraform_leftovers(ROOT) == []


_SCHEMA_TYPES = {"string": str, "bool": bool, "number": int}


def _schema_problems(where: str, config: dict[str, Any], block: dict[str, Any]) -> list[str]:
    """Attributes and nested blocks of a backend configuration against Terraform's backend schema."""
    attributes, blocks = block.get("attributes", {}), block.get("block_types", {})
    problems = [
        f"{where}: {name} is required" for name, a in attributes.items() if a["required"] and name not in config
    ]
    for name, value in config.items():
        if name in blocks:
            problems += _schema_problems(f"{where}.{name}", value, blocks[name]["block"])
        elif name not in attributes:
            problems.append(f"{where}: Terraform's backend has no argument {name}")
        elif (kind := _SCHEMA_TYPES.get(attributes[name]["type"])) and not isinstance(value, kind):
            problems.append(f"{where}.{name}: {value!r} is not a {attributes[name]['type']}")
    return problems


def test_every_backend_block_matches_terraform_s_backend_schema(
    synthesized: Path, fixture_synthesized: Path
) -> None:
    # init -backend=false does not read the backend's arguments, so the check cannot see a wrong one.
    backends = json.loads(shared_path("tools", "terraform-schema-mirror", "schema.json").read_text())["backends"]
    seen, problems = set(), []
    for source in (synthesized, fixture_synthesized):
        for name, folder in tf.stack_folders(source).items():
            settings = json.loads((folder / tf.STACK_FILE).read_text())["terraform"]
            blocks = {
                **settings.get("backend", {}),
                **({"cloud": settings["cloud"]} if "cloud" in settings else {}),
            }
            for kind, config in blocks.items():
                seen.add(kind)
                problems += _schema_problems(f"{name}: {kind}", config, backends[kind]["block"])
    assert problems == []
    assert seen == set(backends), "every backend type Terraform has, as the fixture fleet promises"


def _stack_with_two_backends(source: Path, target: Path) -> None:
    # What the kubernetes backend used to synthesize: Terraform refuses it at init.
    config: dict[str, Any] = json.loads((source / tf.STACK_FILE).read_text())
    config["terraform"]["backend"] = {"kubernetes": {"secret_suffix": "x"}, "local": {"path": "/abs/x.tfstate"}}
    target.mkdir(parents=True)
    (target / tf.STACK_FILE).write_text(json.dumps(config))


def test_a_stack_terraform_rejects_fails_the_check_with_terraform_s_message(
    synthesized: Path, terraform_cli_config: Path, tmp_path: Path
) -> None:
    outdir = tmp_path / "cdktf.out"
    _stack_with_two_backends(synthesized / "stacks" / EXAMPLE_CLUSTERS[0], outdir / "stacks" / "broken")
    run = run_check(["--outdir", str(outdir)], terraform_cli_config, tmp_path / "scratch")
    assert run.code == 1
    assert run.line("broken").startswith("broken: init FAILED")
    assert "terraform init said:" in run.out and "Duplicate backend configuration" in run.out
    assert "1 stack: 0 validated, 0 planned; 1 failed: broken" in run.out
    assert "Traceback" not in run.out + run.err


def test_without_outdir_it_synthesizes_the_chosen_clusters_into_a_temporary_folder(
    terraform_cli_config: Path, tmp_path: Path
) -> None:
    inputs = ["--catalog", str(FLEET / "catalog" / "gpu-catalog.yaml"), "--stacks-dir", str(FLEET / "stacks")]
    run = run_check([*inputs, "--cluster", "tf-http", "--no-plan"], terraform_cli_config, tmp_path / "scratch")
    assert run.code == 0, run.out + run.err
    assert run.line("tf-http").startswith("tf-http: init ok") and "validate ok" in run.line("tf-http")
    assert "plan" not in run.line("tf-http")
    assert "1 stack: 1 validated (plan skipped: --no-plan); all passed" in run.out
    assert run.scratch_left == []
    assert _terraform_leftovers(ROOT) == []


def test_a_failed_provider_install_says_where_providers_come_from(tmp_path: Path) -> None:
    """The hint names a mirror any user can make (Terraform's own `providers mirror`), never a tool of this
    project's CI, and the docs section it points to exists and needs nothing beyond Terraform either."""
    init = tf.Step("init", False, 0.1, "Error: Failed to query available provider packages\n...")
    rc = tmp_path / "mirror.tfrc"
    rc.write_text("provider_installation {}\n", encoding="utf-8")
    hints = {}
    for case, environ in (("unset", {}), ("file", {"TF_CLI_CONFIG_FILE": str(rc)})):
        text = tf.render_result(tf.StackCheck("gpu-east", (init,)), True, tf.provider_source(environ))
        assert text.startswith("gpu-east: init FAILED (0.1 s)\n  terraform init said:\n    Error: Failed to query")
        hints[case] = text.partition("hint: ")[2]
        assert "Terraform could not install the providers" in hints[case] and tf.MIRROR_DOCS in hints[case]
        assert "shared" not in hints[case] and "make-mirror" not in hints[case]
    assert "terraform providers mirror DIR" in hints["unset"] and "TF_CLI_CONFIG_FILE" in hints["unset"]
    assert f"with the CLI configuration {rc}" in hints["file"]
    page, _, anchor = tf.MIRROR_DOCS.partition("#")
    text = (ROOT / page).read_text(encoding="utf-8")
    heading = next(line for line in text.splitlines() if line.startswith("#") and _anchor(line) == anchor)
    section = text.partition(heading)[2].split("\n## ")[0].split("\n### ")[0]
    assert "terraform providers mirror" in section and "filesystem_mirror" in section
    assert "shared" not in section and "make-mirror" not in section


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    words = re.sub(r"[^a-z0-9 -]", "", heading.lstrip("#").strip().lower())
    return words.replace(" ", "-")


@pytest.mark.parametrize(("kind", "said"), [("missing", "does not exist"), ("folder", "is a folder, not a file")])
def test_a_cli_configuration_that_names_no_file_is_said_before_terraform_runs(
    kind: str, said: str, synthesized: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TF_CLI_CONFIG_FILE naming nothing: Terraform only warns and goes to the registry, so a mirror the user
    meant to use is silently not used. terraform-check says so at the start and in the failed init's hint."""
    fake = tmp_path / "terraform"  # a Terraform that cannot reach any registry, as offline
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  version) echo \'{"terraform_version": "1.11.4"}\' ;;\n'
        '  init) echo "Error: Failed to query available provider packages" >&2; exit 1 ;;\n'
        "  *) exit 0 ;;\n"
        "esac\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    config = tmp_path / "mirror.tfrc"
    if kind == "folder":
        config.mkdir()
    monkeypatch.setenv(tf.BINARY_ENV, str(fake))
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(config))
    run = run_check(
        ["--outdir", str(synthesized), "--cluster", "gpu-lab", "--no-plan"], None, tmp_path / "scratch"
    )
    assert run.code == 1 and "Traceback" not in run.err
    warning = f"warning: TF_CLI_CONFIG_FILE names {config}, which {said}: Terraform says `Unable to open CLI"
    assert run.err.startswith(warning), run.err
    first = run.out.splitlines()[0]
    assert first.endswith(
        f"providers from the registry: TF_CLI_CONFIG_FILE={config} {said}, so Terraform ignores it"
    )
    hint = run.out.partition("hint: ")[2]
    assert hint.startswith(f"TF_CLI_CONFIG_FILE names {config}, which {said}") and "unset it" in hint
    assert "terraform providers mirror DIR" in hint and "shared" not in hint
    assert run.scratch_left == []


def test_unknown_cluster_is_bad_input(synthesized: Path, tmp_path: Path) -> None:
    binary("terraform")
    run = run_check(["--outdir", str(synthesized), "--cluster", "gpu-north"], None, tmp_path / "scratch")
    assert run.code == 2
    assert (
        f"command line: --cluster gpu-north: no stack of that name; known: {', '.join(sorted(EXAMPLE_CLUSTERS))}"
        in run.err
    )


def test_missing_terraform_is_a_message_not_a_traceback(
    synthesized: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tf.BINARY_ENV, "terraform-not-installed-here")
    run = run_check(["--outdir", str(synthesized)], None, tmp_path / "scratch")
    assert run.code == 2
    assert run.err.startswith("terraform-check: no 'terraform-not-installed-here' found on PATH.")
    assert "OpenTofu" in run.err and "Traceback" not in run.err


def test_plan_configuration_has_no_backend_and_the_environment_keeps_scratch_apart(tmp_path: Path) -> None:
    config: dict[str, Any] = {
        "terraform": {"backend": {"s3": {}}, "required_version": ">= 1.10"},
        "resource": {"x": {}},
    }
    assert tf.without_state_backend(config) == {
        "terraform": {"required_version": ">= 1.10"},
        "resource": {"x": {}},
    }
    assert tf.without_state_backend({"terraform": {"cloud": {"organization": "o"}}}) == {"terraform": {}}
    assert config["terraform"]["backend"] == {"s3": {}}, "the stack's own configuration is left alone"
    env = tf.terraform_environment(tmp_path, {"TF_DATA_DIR": "/home/me/.tfdata", "TF_WORKSPACE": "prod", "A": "b"})
    assert "TF_DATA_DIR" not in env and "TF_WORKSPACE" not in env and env["A"] == "b"
    assert env["TF_PLUGIN_CACHE_DIR"] == str(tmp_path)
    assert tf.terraform_environment(tmp_path, {"TF_PLUGIN_CACHE_DIR": "/mine"})["TF_PLUGIN_CACHE_DIR"] == "/mine"


# --- terraform validate against HashiCorp's own providers, as `make sandbox-tools` builds them from source -------


@pytest.fixture(scope="session")
def built_providers() -> None:
    """HashiCorp's providers built from their source archives (skip, or fail in CI, without them)."""
    from themelio_gpu.sandbox.errors import MissingToolError
    from themelio_gpu.sandbox.tools import load_tools, toolbox

    binary("terraform")
    try:
        toolbox(tuple(name for name, tool in load_tools().items() if tool.provider))
    except MissingToolError as error:
        unavailable(f"HashiCorp's providers are not built: {error}")


def test_every_fixture_stack_validates_against_the_real_providers(
    built_providers: None, both_fleets: tuple[Run, dict[str, bytes]], tmp_path: Path
) -> None:
    """The stacks of the example, terraform and capability fleets (every backend, access and pool kind) validate
    against hashicorp/kubernetes 2.38.0 and hashicorp/helm 3.1.1 themselves; the mirror they come from holds
    the builds under their own versions."""
    _, files = both_fleets
    outdir = tmp_path / "cdktf.out"
    for name in {path.split("/", 2)[1] for path in files}:
        (outdir / "stacks" / name).mkdir(parents=True)
    for path, data in files.items():
        (outdir / path).write_bytes(data)
    run = run_check(["--outdir", str(outdir), "--built-providers", "--jobs", "4"], None, tmp_path / "scratch")
    assert run.code == 0, run.out + run.err
    assert "HashiCorp's, built from source by `make sandbox-tools` (kubernetes 2.38.0, kubernetes 3.2.1" in run.out
    count = len({path.split("/", 2)[1] for path in files})
    assert f"{count} stacks: {count} validated (plan skipped: --built-providers)" in run.out
    assert run.scratch_left == []


def test_a_value_only_the_real_provider_refuses_fails_validate_with_the_providers_message(
    built_providers: None, synthesized: Path, terraform_cli_config: Path, tmp_path: Path
) -> None:
    """A namespace name Kubernetes refuses: Terraform's schema check passes it (a string), so does the schema
    mirror's validate, and the real kubernetes provider's own validation (validateName) refuses it."""
    source = synthesized / "stacks" / EXAMPLE_CLUSTERS[0]
    config: dict[str, Any] = json.loads((source / tf.STACK_FILE).read_text())
    namespace = next(iter(config["resource"]["kubernetes_namespace_v1"].values()))
    metadata = namespace["metadata"]
    (metadata[0] if isinstance(metadata, list) else metadata)["name"] = "GPU_Catalog"
    outdir = tmp_path / "cdktf.out"
    (outdir / "stacks" / "broken").mkdir(parents=True)
    (outdir / "stacks" / "broken" / tf.STACK_FILE).write_text(json.dumps(config))
    schema_only = run_check(["--outdir", str(outdir), "--no-plan"], terraform_cli_config, tmp_path / "s1")
    assert schema_only.code == 0, schema_only.out + schema_only.err
    real = run_check(["--outdir", str(outdir), "--built-providers"], None, tmp_path / "s2")
    assert real.code == 1
    assert real.line("broken").startswith("broken: init ok") and "validate FAILED" in real.line("broken")
    assert "terraform validate said:" in real.out and "GPU_Catalog" in real.out and "RFC 1123" in real.out


def test_several_fleets_are_checked_in_one_run_each_stack_named_by_its_fleet(
    synthesized: Path, terraform_cli_config: Path, tmp_path: Path
) -> None:
    """(`synthesized` first: the session's jsii kernel keeps its folder in the temporary folder it started in.)"""
    fleets = [str(FIXTURES / "fleets" / name) for name in ("example", "local-charts")]
    run = run_check(
        [arg for f in fleets for arg in ("--fleet", f)] + ["--no-plan"], terraform_cli_config, tmp_path / "s"
    )
    assert run.code == 0, run.out + run.err
    assert run.line("example/gpu-east").startswith("example/gpu-east: init ok")
    assert "validate ok" in run.line("local-charts/gpu-airgap")  # its chart archive travels with the stack
    assert "4 stacks: 4 validated" in run.out and run.scratch_left == []
    wrong = run_check(["--fleet", str(tmp_path), "--cluster", "gpu-east"], None, tmp_path / "s2")
    assert wrong.code == 2 and wrong.out == ""
    assert wrong.err.strip() == (
        f"terraform-check: --fleet: {tmp_path} has no catalog/gpu-catalog.yaml and no stacks/; --fleet names each "
        "fleet's folder: leave out --catalog, --stacks-dir, --outdir and --cluster"
    )
