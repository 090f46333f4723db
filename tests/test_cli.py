"""The command line as users run it: exit codes, messages without tracebacks, input locations."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.builders import cluster, write_fleet
from tests.conftest import EXAMPLE_CATALOG, ROOT
from themelio_gpu.cli import main


def stack_file(cluster: str) -> str:
    """Where a stack lands inside a synthesized output folder (as `check` names it)."""
    return f"stacks/{cluster}/cdk.tf.json"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=False, env=env)


def test_bad_input_lists_every_problem_and_writes_nothing(tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="a", offerings=["nvidia.com/nope"]), cluster(name="a")])
    (stacks / "broken.yaml").write_text("name: [\n", encoding="utf-8")
    (stacks / "typo.yaml").write_text(yaml.safe_dump({**cluster(name="t"), "nodepools": []}), encoding="utf-8")
    out = tmp_path / "out"
    result = run("main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(out))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith(f"{stacks}/broken.yaml: line 2, column 1: invalid YAML") for line in lines), lines
    assert any(
        line.startswith(
            f"{stacks}/typo.yaml: nodepools: unknown key; did you mean nodePools? (keys allowed here: "
        )
        for line in lines
    ), lines
    assert any(
        line.startswith(f"{stacks}/a.yaml: offerings[0]: nvidia.com/nope is not in the catalog") for line in lines
    )
    assert any(line.startswith(f"{stacks}/again-1/a.yaml: name: cluster 'a' is also defined in") for line in lines)
    assert lines[-1].endswith("problems found; nothing was written.")
    assert not out.exists()


def test_wrong_type_and_missing_catalog(tmp_path: Path) -> None:
    _, stacks = write_fleet(
        tmp_path, [cluster(nodePools=[{"name": "p", "product": "a10g", "gpusPerNode": "eight"}])]
    )
    result = run("main.py", "--catalog", str(tmp_path / "missing.yaml"), "--stacks-dir", str(stacks))
    assert result.returncode == 2
    assert f"{tmp_path}/missing.yaml: file not found" in result.stderr
    assert "nodePools[0].gpusPerNode: must be a whole number, not the text 'eight'" in result.stderr
    assert "Traceback" not in result.stderr


def test_environment_variables_choose_the_inputs(tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="from-env")])
    env = {"THEMELIO_CATALOG": str(catalog), "THEMELIO_STACKS_DIR": str(stacks), "PATH": "/usr/bin:/bin"}
    result = run("-m", "themelio_gpu", "validate", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK: 6 offerings, 1 cluster"  # one, not "1 clusters"


def test_validate_says_when_a_schema_beside_the_fleet_is_missing_or_stale(tmp_path: Path) -> None:
    """`rm stacks/*` (the README's "delete the example files in stacks/", taken literally) also deletes the
    cluster schema editors read: validate says so, and how to write it again."""
    from themelio_gpu.render.schemas import CLUSTER_SCHEMA, schema_texts

    project = tmp_path / "fork"
    project.mkdir()
    write_fleet(project, [cluster(name="north")])
    (project / "catalog").mkdir()
    shutil.copy(EXAMPLE_CATALOG, project / "catalog" / "gpu-catalog.yaml")
    env = {"PATH": "/usr/bin:/bin", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    command = [sys.executable, "-m", "themelio_gpu", "validate"]
    for path, text in schema_texts().items():
        (project / path).write_text(text, encoding="utf-8")

    def validate() -> subprocess.CompletedProcess[str]:
        python_path = {"PYTHONPATH": str(ROOT)}
        return subprocess.run(
            command, cwd=project, capture_output=True, text=True, check=False, env={**env, **python_path}
        )

    current = validate()
    assert current.returncode == 0 and current.stderr == "", current.stderr
    (project / CLUSTER_SCHEMA).unlink()
    missing = validate()
    assert missing.returncode == 0 and missing.stdout.startswith("OK: "), missing.stderr
    assert missing.stderr.splitlines() == [
        f"warning: {CLUSTER_SCHEMA} is missing: editors check and complete the files beside it with it (their "
        "$schema line names it). `make schemas` writes it again; keep it when you replace the example files"
    ]
    (project / CLUSTER_SCHEMA).write_text("{}\n", encoding="utf-8")
    assert f"warning: {CLUSTER_SCHEMA} is out of date" in validate().stderr


def test_catalog_validate_show_export_and_quota(tmp_path: Path) -> None:
    # Without flags the commands read $THEMELIO_CATALOG / $THEMELIO_STACKS_DIR: the fixture fleet here.
    assert run("-m", "themelio_gpu", "catalog", "validate").stdout.startswith(
        f"OK: {EXAMPLE_CATALOG.relative_to(ROOT)}: 6 offerings"
    )
    show = run("-m", "themelio_gpu", "catalog", "show").stdout
    assert "nvidia.com/a100-mig-1g.5gb   a100-40gb-mig-1g.5gb.gpu.themelio.io" in show
    assert "gpu-east, gpu-lab" in show
    assert "1g.10gb x4" in show  # the A100-40GB row of the product table
    out = tmp_path / "generated"
    assert run("-m", "themelio_gpu", "catalog", "export", "--out", str(out)).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "clusters",
        "gpu-labels.yaml",
        "kubeflow-spawner-gpus.yaml",
        "kubeflow-workspacekind-podconfig.yaml",
    ]
    assert sorted(p.name for p in (out / "clusters").iterdir()) == ["gpu-east", "gpu-lab", "gpu-west"]
    quota = run(
        "-m",
        "themelio_gpu",
        "catalog",
        "quota",
        "--cluster",
        "gpu-west",
        "--namespace",
        "team-a",
        "nvidia.com/h100=4",
    )
    assert quota.returncode == 0, quota.stderr
    assert yaml.safe_load(quota.stdout)["spec"]["hard"]["requests.nvidia.com/h100"] == "4"


def test_check_passes_on_an_unchanged_fleet(synthesized: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--against", str(synthesized)]) == 0
    assert "is up to date" in capsys.readouterr().out


def test_check_fails_with_a_diff_on_a_changed_fleet(
    synthesized: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = tmp_path / "committed"
    shutil.copytree(synthesized, committed)
    east = committed / "stacks" / "gpu-east" / "cdk.tf.json"
    east.write_text(east.read_text().replace('"version": "0.4.1"', '"version": "0.4.0"'))
    (committed / "stacks" / "gpu-old").mkdir()
    (committed / "stacks" / "gpu-old" / "cdk.tf.json").write_text("{}")
    assert main(["check", "--against", str(committed)]) == 1
    out = capsys.readouterr().out
    assert f"changed: {stack_file('gpu-east')}" in out
    assert f"stale (no longer synthesized): {stack_file('gpu-old')}" in out
    assert '-        "version": "0.4.0",' in out
    assert '+        "version": "0.4.1",' in out


def test_main_synthesizes_with_progress_and_summary(tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="solo")])
    result = run(
        "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(tmp_path / "out")
    )
    assert result.returncode == 0, result.stderr
    assert "[1/1] solo: 3 DeviceClasses" in result.stdout
    assert "cluster  k8s   offerings  DeviceClasses  pools  releases" in result.stdout
    assert (tmp_path / "out" / "stacks" / "solo" / "cdk.tf.json").exists()
    assert "Node.js" not in result.stderr  # the jsii end-of-life banner is silenced


def test_a_count_of_one_is_singular(tmp_path: Path) -> None:
    """`1 DeviceClass`, not `1 DeviceClasses`: a cluster serving one offering gets one class."""
    pool = {"name": "whole", "product": "a100-40gb", "gpusPerNode": 8, "provisioning": {"provisioned": {}}}
    catalog, stacks = write_fleet(tmp_path, [cluster(name="one", offerings=["nvidia.com/a100"], nodePools=[pool])])
    result = run(
        "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(tmp_path / "out")
    )
    assert result.returncode == 0, result.stderr
    assert "[1/1] one: 1 DeviceClass\n" in result.stdout
    from themelio_gpu.words import count

    assert [count(n, "DeviceClass", "DeviceClasses") for n in (0, 1, 2)] == [
        "0 DeviceClasses",
        "1 DeviceClass",
        "2 DeviceClasses",
    ]
    assert [count(n, "node") for n in (1, 3)] == ["1 node", "3 nodes"]


def test_unwritable_export_folder_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run("-m", "themelio_gpu", "catalog", "export", "--out", str(blocker / "out"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert str(blocker / "out") in result.stderr


def test_unwritable_outdir_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run("main.py", "--outdir", str(blocker / "out"), "--quiet")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{blocker / 'out'}: Not a directory" in result.stderr


# --- catalog quota and export on the quota fixture fleet ---------------------------------------------------

QUOTA_FLEET = ROOT / "tests" / "fixtures" / "fleets" / "quota-chart-gpu"
FLEET_FLAGS = (
    "--catalog",
    str(QUOTA_FLEET / "catalog" / "gpu-catalog.yaml"),
    "--stacks-dir",
    str(QUOTA_FLEET / "stacks"),
)


def quota(*args: str) -> subprocess.CompletedProcess[str]:
    return run("-m", "themelio_gpu", "catalog", "quota", *FLEET_FLAGS, *args)


def test_catalog_quota_warns_of_a_grant_only_a_reserved_pool_serves_that_no_queue_admits_there() -> None:
    """West serves nvidia.com/h100-mig-1g.10gb only on its reserved pool h100-mig, granted by queue sliced to
    team-sliced: a grant to another namespace is written, with a warning; to team-sliced, without one."""
    elsewhere = quota(
        "--cluster", "west", "--namespace", "team-x", "nvidia.com/h100-mig-1g.10gb=2", "nvidia.com/h100=1"
    )
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert "nvidia.com/h100-mig-1g.10gb: '2'" in elsewhere.stdout
    warnings = [line for line in elsewhere.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: nvidia.com/h100-mig-1g.10gb: cluster west serves it only on reserved pools (pool h100-mig carries "
        "themelio.io/sliced=true:NoSchedule, which its tolerations do not tolerate), and no kueue.queues entry "
        "granting them admits team-x (queue sliced admits team-sliced): its pods would stay Pending. Add team-x to "
        "the namespaces of the queue granting the pool, or grant an offering an open pool serves"
    ]
    admitted = quota("--cluster", "west", "--namespace", "team-sliced", "nvidia.com/h100-mig-1g.10gb=2")
    assert admitted.returncode == 0 and "warning" not in admitted.stderr, admitted.stderr


def test_catalog_quota_closes_every_other_gpu_of_the_cluster() -> None:
    result = quota("--cluster", "gpu-east", "--namespace", "team-a", "nvidia.com/a100=4")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout) == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "labels": {"app.kubernetes.io/managed-by": "themelio-gpu-stacks"},
            "name": "custom-resource-quota",
            "namespace": "team-a",
        },
        "spec": {
            "hard": {
                "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
                "requests.nvidia.com/a100": "4",
                "requests.nvidia.com/a100-mig-1g.5gb": "0",
                "requests.nvidia.com/a100-mig-3g.20gb": "0",
                "requests.nvidia.com/gpu": "0",
                "requests.nvidia.com/mig-1g.5gb": "0",
                "requests.nvidia.com/mig-3g.20gb": "0",
                "vfio.gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
            }
        },
    }
    assert result.stderr == ""


def test_catalog_quota_says_where_a_grant_sits_and_what_the_any_gpu_pool_adds() -> None:
    result = quota(
        "--cluster", "gpu-east", "--namespace", "team-a", "nvidia.com/a100-mig-1g.5gb=3", "nvidia.com/a100=2",
        "nvidia.com/gpu=1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    hard = yaml.safe_load(result.stdout)["spec"]["hard"]
    assert (hard["requests.nvidia.com/mig-1g.5gb"], hard["requests.nvidia.com/a100-mig-1g.5gb"]) == ("3", "0")
    assert result.stderr.splitlines() == [
        "note: nvidia.com/a100-mig-1g.5gb: the grant sits on nvidia.com/mig-1g.5gb, the name cluster gpu-east "
        "migrates from, until serveMigrationAliases: false; nvidia.com/a100-mig-1g.5gb itself is 0 (name both to "
        "split the grant)",
        "note: nvidia.com/a100: this namespace can hold up to 3 of its devices (2 granted, plus nvidia.com/gpu=1, "
        "which can be taken as them too)",
    ]


def test_catalog_quota_reports_every_problem_at_once() -> None:
    result = quota("--cluster", "nowhere", "--namespace", "Team_A", "nvidia.com/a100=four", "nvidia.com/a100")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "command line: --namespace Team_A: not a valid namespace: 'Team_A' is not a DNS-1123 label (lower-case letters, digits and '-', "
        "alphanumeric at both ends)",
        "command line: nvidia.com/a100=four: write OFFERING=COUNT with a whole number, e.g. nvidia.com/a100=4",
        "command line: nvidia.com/a100: write OFFERING=COUNT with a whole number, e.g. nvidia.com/a100=4",
        "command line: --cluster nowhere: no cluster of that name; known: gpu-east, lab, legacy, west",
        "4 problems found; nothing was written.",
    ]
    result = quota("--cluster", "west", "--namespace", "team-a", "nvidia.com/a100=1", "nvidia.com/h100-80gb=2")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "command line: nvidia.com/a100=1: cluster west serves no offering of that name; it serves: "
        "nvidia.com/a10g, nvidia.com/gpu, nvidia.com/h100, nvidia.com/h100-mig-1g.10gb",
        "command line: nvidia.com/h100-80gb=2: is a migration alias of nvidia.com/h100, which cluster west no "
        "longer serves (serveMigrationAliases: false); grant nvidia.com/h100",
        "2 problems found; nothing was written.",
    ]


def test_catalog_quota_without_grants_closes_the_namespace() -> None:
    result = quota("--cluster", "legacy", "--namespace", "team-z")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "0",
        "requests.nvidia.com/mig-1g.5gb": "0",
    }


def test_catalog_export_writes_per_cluster_files_from_the_quota_plan(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("-m", "themelio_gpu", "catalog", "export", *FLEET_FLAGS, "--out", str(out))
    assert result.returncode == 0, result.stderr
    east = out / "clusters" / "gpu-east"
    assert sorted(p.name for p in east.iterdir()) == [
        "kubeflow-spawner-gpus.yaml",
        "kubeflow-workspacekind-podconfig.yaml",
        "kueue.yaml",
        "polyaxon-presets",
        "resource-quota-closed.yaml",
        "waldur-backend-components.yaml",
        "waldur-quota-mapping.yaml",
    ]
    presets = sorted(
        p.relative_to(east / "polyaxon-presets").as_posix() for p in east.rglob("polyaxon-presets/**/*")
    )
    assert [p for p in presets if p.endswith(".yaml")] == [
        "nvidia.com/a100-mig-1g.5gb.yaml",
        "nvidia.com/a100-mig-3g.20gb.yaml",
        "nvidia.com/a100.yaml",
        "nvidia.com/gpu.yaml",
    ]
    mapping = yaml.safe_load((east / "waldur-quota-mapping.yaml").read_text())
    components = {c["component"]: c["quotaKey"] for c in mapping["components"]}
    closed = yaml.safe_load((east / "resource-quota-closed.yaml").read_text())
    # Every key of the cluster is set by exactly one of the two quotas.
    everything = set(yaml.safe_load(quota("--cluster", "gpu-east", "--namespace", "x").stdout)["spec"]["hard"])
    assert set(components.values()) | set(closed["spec"]["hard"]) == everything
    assert not set(components.values()) & set(closed["spec"]["hard"])
    assert set(closed["spec"]["hard"].values()) == {"0"}
    assert components["gpu_a100_mig_1g_5gb"] == "requests.nvidia.com/mig-1g.5gb"
    backend = yaml.safe_load((east / "waldur-backend-components.yaml").read_text())
    assert backend["gpu_a100_mig_1g_5gb"]["k8s_resource"] == "nvidia.com/mig-1g.5gb"
