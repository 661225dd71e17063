"""Benchmark scripts that build gplace's graph and cluster configs, annotate the bench's results and rewrite their
pages: the graph YAMLs start with a Hydra defaults list (``_defaults/<group>/<name>``), which ``OmegaConf.load`` left
unapplied (sample_efficiency.py, gdp_vs_hdp.py and gdp_workloads.py crashed before running anything);
annotate_results.py crashed where a best baseline of ``results.json`` no longer places (``single_cpu`` on PipeDream's
GPU-only graphs); a report-only rewrite of gdp_vs_hdp.md deleted its hand-written lead."""

import importlib.util
import shutil
import sys
from pathlib import Path

import hydra
import pytest
from omegaconf import open_dict

from gplace.ir import Cluster, OpGraph

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def _script(name: str, monkeypatch):
    """``benchmarks/<name>.py`` as a module (its sibling ``report_notes`` importable, as when run as a script)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"bench_script_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", ["gdp_vs_hdp", "gdp_workloads"])
def test_the_scripts_build_a_zoo_graph_and_cluster_from_their_configs(script, monkeypatch):
    bench = _script(script, monkeypatch)
    graph, cluster = bench._config("graph", "rnnlm"), bench._config("cluster", "paper_4gpu")
    assert isinstance(graph, OpGraph) and graph.num_ops > 0
    assert isinstance(cluster, Cluster) and cluster.num_devices == 5


def test_sample_efficiency_builds_its_graphs_and_clusters_from_their_configs(monkeypatch):
    bench = _script("sample_efficiency", monkeypatch)
    graph, cluster = bench._graph("rnnlm"), bench._cluster("paper_2gpu")
    assert isinstance(graph, OpGraph) and graph.num_ops > 0
    assert isinstance(cluster, Cluster) and cluster.num_devices == 3


def test_annotate_results_says_where_a_best_baseline_no_longer_places(monkeypatch):
    shared = ROOT.parent / "shared"
    if not (shared / "graphs/pipedream/profiles/alexnet/graph.txt").exists():
        pytest.skip("needs the shared PipeDream graphs (../shared)")
    monkeypatch.setenv("GPLACE_SHARED", str(shared))
    bench = _script("annotate_results", monkeypatch)
    real = hydra.compose

    def alexnet_only(config_name=None, overrides=None, **kwargs):
        cfg = real(config_name=config_name, overrides=overrides or [], **kwargs)
        if config_name == "bench_paper":  # rebuild only the case whose best baseline (single_cpu) no longer places
            with open_dict(cfg):
                cfg.cases = [c for c in cfg.cases if "alexnet/graph.txt" in str(c)]
        return cfg

    monkeypatch.setattr(hydra, "compose", alexnet_only)
    cases = [c for c in bench.load_cases(BENCHMARKS / "results.json") if c.graph == "alexnet"]
    assert cases and cases[0].best(cases[0].baselines)[0] == "single_cpu"
    facts = bench.graph_facts("bench_paper", cases)
    key = (cases[0].graph, cases[0].cluster)
    assert "may run on /CPU:0" in facts.unplaced[key] and key in facts.terms and key not in facts.projected
    lines, _ = bench.never_slower(cases, facts.projected, facts.unplaced)
    assert any("| no longer places |" in line for line in lines)
    assert any("`single_cpu`, no longer places" in line for line in lines)


@pytest.mark.parametrize(("page", "note"), [
    ("gdp_vs_hdp.md", "Every figure above (the verdict and the table) was measured before"),
    ("gdp_vs_hdp_corrected/gdp_vs_hdp.md", "What this page's figures above are: on the zoo's corrected costs"),
])
def test_a_report_only_rewrite_of_gdp_vs_hdp_keeps_the_pages_notes(page, note, tmp_path, monkeypatch):
    source = BENCHMARKS / page
    shutil.copy(source, tmp_path / "gdp_vs_hdp.md")
    shutil.copy(source.with_suffix(".json"), tmp_path / "gdp_vs_hdp.json")
    bench = _script("gdp_vs_hdp", monkeypatch)
    monkeypatch.setattr(sys, "argv", ["gdp_vs_hdp.py", "--report-only", "--work", str(tmp_path),
                                      "--out", str(tmp_path / "gdp_vs_hdp.md")])
    bench.main()
    mark = bench.write_report.__globals__["NOTES_MARK"]
    new, old = (tmp_path / "gdp_vs_hdp.md").read_text(), source.read_text()
    assert note in old.split(mark)[1]  # the hand-written part sits below the mark ...
    assert new.split(mark)[1] == old.split(mark)[1]  # ... and survives the rewrite
    assert new.startswith("# GDP vs the hierarchical placer")
