"""What `verify` runs: for each cluster, get and render its charts, validate, prove, report."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from themelio_gpu.charts.helm import ChartError, helm_binary
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.plan.manifests import device_class_manifest
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.verify.charts import ChartSource
from themelio_gpu.verify.proof import ClusterProof, prove_cluster, render_proof
from themelio_gpu.verify.render import RenderedRelease, render_release
from themelio_gpu.verify.validation import ValidationResult, load_kubernetes_validate, validate_objects
from themelio_gpu.words import count


def verify_cluster(plan: ClusterPlan, source: ChartSource, work_dir: Path, kv: ModuleType) -> ClusterProof:
    rendered: list[RenderedRelease] = []
    for spec in plan.releases:
        try:
            chart_dir = source.chart_dir(spec)
            rendered.append(render_release(source.helm, spec, chart_dir, plan.definition, work_dir))
        except ChartError as error:
            proof = ClusterProof(plan)
            proof.lines.append(
                f"release {spec.name}: chart {spec.chart} {spec.version} from {source.describe(spec)}"
            )
            proof.failures.append(f"release {spec.name}: {error}; nothing proven for this cluster")
            return proof
    objects: list[tuple[str, Any]] = [
        ("this stack", device_class_manifest(c, plan.names)) for c in plan.device_classes
    ]
    objects += [(f"release {r.spec.name}", o) for r in rendered for o in r.objects]
    validation: ValidationResult = validate_objects(objects, plan.definition.kubernetes_version, kv)
    return prove_cluster(plan, rendered, validation)


def verify_clusters(
    plans: Sequence[ClusterPlan], charts_dir: Path, out: TextIO, *, is_cache: bool = False
) -> bool:
    """Prints one report per cluster and a summary; True when every cluster is proven.

    The charts come from `charts_dir` (`is_cache`: the chart cache, whose missing charts `charts fetch` gets).
    """
    helm = helm_binary()
    kv = load_kubernetes_validate()
    proofs = []
    with tempfile.TemporaryDirectory(prefix="themelio-verify-") as tmp:
        source = ChartSource(helm, charts_dir, is_cache=is_cache)
        for plan in plans:
            proof = verify_cluster(plan, source, Path(tmp), kv)
            print(render_proof(proof), end="\n\n", file=out)
            proofs.append(proof)
    failed = [p for p in proofs if p.failures]
    pools = sum(len(p.pools) for p in proofs)
    placements = sum(len(pool.rows) for p in proofs for pool in p.pools)
    where = f"charts from {display_path(charts_dir)}"
    scope = f"{count(len(proofs), 'cluster')}, {count(pools, 'pool')}"
    if failed:
        problems = count(sum(len(p.failures) for p in failed), "problem")
        names = ", ".join(p.plan.name for p in failed)
        print(f"verify FAILED: {problems} in {names} ({scope}, {where})", file=out)
        return False
    print(f"verify OK: {scope}, {count(placements, 'DaemonSet placement')} ({where})", file=out)
    return True
