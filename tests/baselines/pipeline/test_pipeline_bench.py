"""The pipeline bench: records per method, schedule and M, the report, the plot, and its Hydra config."""

from __future__ import annotations

import json
import math

import pytest

from gplace import testing
from gplace.baselines import SingleDevice
from gplace.baselines.pipeline import IdealDPPartitioner, PipelineILPPlacer, StageProblem, pipeline_lower_bound
from gplace.bench.pipeline import (
    PipelineRecord,
    is_contiguous,
    load_pipeline_records,
    pipeline_report,
    run_pipeline_case,
    speedups,
    targets_section,
    write_pipeline_results,
)
from gplace.importers import without_activation_memory
from gplace.ir import Edge, Op, OpGraph, Placement


def test_every_method_schedule_and_m_gets_a_record(tmp_path) -> None:
    graph, cluster = testing.chain((1.0, 1.0, 1.0, 1.0), nbytes=0), testing.uniform_cluster(2)
    placers = {"single_gpu": SingleDevice(kind="gpu"), "ideal_dp": IdealDPPartitioner(),
               "ilp": PipelineILPPlacer(max_variables=5)}
    records = run_pipeline_case(graph, cluster, placers, microbatches=[1, 4], schedules=["gpipe", "1f1b"])
    assert len(records) == 2 * 2 * 3
    by = {(r.schedule, r.microbatches, r.method): r for r in records}
    assert by["gpipe", 4, "single_gpu"].minibatch_time == pytest.approx(4.0)
    assert by["gpipe", 4, "ideal_dp"].minibatch_time == pytest.approx(2.5)  # 2 stages of 0.5 s, 4 + 1 slots
    assert by["gpipe", 1, "ideal_dp"].minibatch_time == pytest.approx(4.0)  # one micro-batch: no overlap
    too_large = by["1f1b", 4, "ilp"]
    assert too_large.failed and math.isinf(too_large.minibatch_time) and "max_variables" in too_large.reason
    assert all(r.lower_bound == pipeline_lower_bound(graph, cluster) == 2.0 for r in records)

    write_pipeline_results(records, tmp_path)
    doc = json.loads((tmp_path / "pipeline_results.json").read_text())
    assert doc[0].keys() >= {"graph", "cluster", "schedule", "microbatches", "method", "minibatch_time",
                             "lower_bound", "search_seconds", "failed"}
    report = (tmp_path / "PIPELINE.md").read_text()
    assert "| chain | 4 | 2xgpu | gpipe | 4 | 4000 | 1.00x | 1.60x | failed | 2.00x |" in report
    assert (tmp_path / "plots" / "pipeline_throughput.png").stat().st_size > 0


def test_without_activation_memory_keeps_transfers_and_the_source() -> None:
    """Its source was dropped (a torch graph passed through it could no longer be profiled or run)."""
    graph = OpGraph.from_ops([Op("a", "X", 1.0, output_bytes=10**15), Op("b", "X", 1.0)], [Edge("a", "b")],
                             source={"program": 1})
    light = without_activation_memory(graph)
    assert light.output_bytes.tolist() == [0, 0] and light.edge_bytes.tolist() == [10**15]
    assert light.source == {"program": 1}


def test_the_bench_config_composes() -> None:
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="bench_pipeline")
    assert cfg.pipeline and list(cfg.microbatches) == [4, 16] and list(cfg.schedules) == ["gpipe", "1f1b"]
    placers = {name: instantiate(spec) for name, spec in cfg.placers.items()}
    assert {"single_gpu", "gpipe", "pipedream", "ideal_dp", "ilp"} <= set(placers)
    assert instantiate(cfg.clusters.k80x4).name == "haswell+4xK80"


def _record(method: str, ms: float, reason: str = "") -> PipelineRecord:
    failed = not math.isfinite(ms)
    return PipelineRecord("g", "c", "1f1b", 4, method, ms / 1e3, 0.001, 0.0, failed, reason, 10, 2)


def test_a_graph_one_gpu_cannot_hold_is_compared_with_the_fastest_method(tmp_path) -> None:
    records = [_record("single_gpu", math.inf, "out of memory on gpu:0"), _record("gpipe", 4.0),
               _record("ideal_dp", 2.0), _record("ilp", math.inf, "ProblemTooLargeError: ...")]
    report = pipeline_report(records)
    assert "| g | 10 | c | 1f1b | 4 | 2 (ideal_dp) | OOM | 0.50x | 1.00x | failed | 2.00x |" in report
    assert "0.00x" not in report and "inf" not in report
    assert speedups(records) == {}  # nothing is over one GPU when one GPU did not run
    write_pipeline_results(records, tmp_path)
    assert load_pipeline_records(tmp_path / "pipeline_results.json") == records


def test_a_graph_with_no_work_is_reported_not_divided_by_zero() -> None:
    """An all-zero-cost graph measured 0 s by every method: PIPELINE.md's writer divided by it
    (ZeroDivisionError), which stopped the bench after that graph and lost the cases after it."""
    records = [_record("single_gpu", 0.0), _record("gpipe", 0.0), _record("ideal_dp", 0.0)]
    report = pipeline_report(records)
    assert "| 1.00x | 1.00x |" in report and "inf" not in report
    assert set(speedups(records).values()) == {1.0}


def test_contiguity_of_a_split() -> None:
    graph, cluster = testing.chain((1.0, 1.0, 1.0, 1.0), nbytes=0), testing.uniform_cluster(2)
    problem = StageProblem(graph, cluster)
    assert is_contiguous(problem, Placement.for_graph(graph, [0, 0, 1, 1]))
    assert is_contiguous(problem, Placement.for_graph(graph, [1, 1, 0, 0]))  # any numbering of the stages
    assert not is_contiguous(problem, Placement.for_graph(graph, [0, 1, 1, 0]))


def test_searches_start_from_the_fastest_placer_of_the_case() -> None:
    graph, cluster = testing.chain((1.0, 1.0, 1.0, 1.0), nbytes=0), testing.uniform_cluster(2)
    starts = []

    def search(g, c, runtime, warm):  # a search that returns its start (or one GPU, cold)
        starts.append(warm)
        return warm or Placement.single(g, 0)

    placers = {"single_gpu": SingleDevice(kind="gpu"), "ideal_dp": IdealDPPartitioner()}
    records = run_pipeline_case(graph, cluster, placers, microbatches=[4], schedules=["1f1b"],
                                searches={"s": search}, search_cases=[(4, "1f1b")])
    by = {r.method: r for r in records}
    assert starts[0] is None and starts[1] == IdealDPPartitioner().place(graph, cluster)
    assert by["s_warm"].minibatch_time == by["ideal_dp"].minibatch_time < by["s"].minibatch_time
    assert by["s_warm"].contiguous and by["ideal_dp"].contiguous
    targets = targets_section(records, {}, cluster=cluster.name, microbatches=4, profiles=[], searches=["s"])
    assert "Warm-started search never worse than the DP: met (1 of 1 cases)" in targets
    assert ("Cold ends within 5 % of the best placer: missed (0 of 1 cases; of the best partitioner, the local "
            "searches left out: 0 of 1)") in targets


def test_cold_search_is_compared_with_the_partitioners_and_with_the_local_search_apart() -> None:
    def record(method: str, ms: float) -> PipelineRecord:
        return PipelineRecord("g", "c", "1f1b", 16, method, ms / 1e3, 0.001, 1.0, False, contiguous=True)

    records = [record("single_gpu", 40.0), record("ideal_dp", 16.0), record("local_search_1f1b", 14.0),
               record("s", 16.5), record("s_warm", 14.0)]
    targets = targets_section(records, {}, cluster="c", microbatches=16, profiles=[], searches=["s"])
    assert "| 16 | 14 (local_search_1f1b) | 16 (ideal_dp) | 16.5 | 14 | True | yes | 1.179 | 1.031 |" in targets
    assert "missed (0 of 1 cases; of the best partitioner, the local searches left out: 1 of 1)" in targets


def test_the_bench_runs_from_its_config_and_resumes(tmp_path) -> None:
    """gplace/conf/bench_pipeline.yaml with a 4-op chain on 2 devices and a 1-update search; a resumed run keeps
    the records it finds (their timings come back unchanged) and writes the same report."""
    from hydra import compose, initialize_config_module

    from gplace.bench.pipeline import bench_pipeline

    overrides = [f"out_dir={tmp_path}", "~graphs", "+graphs={c: {_target_: gplace.testing.chain, costs: [1, 2, 3, 1]}}",
                 "~clusters", "+clusters={two: {_target_: gplace.testing.uniform_cluster, num_devices: 2}}",
                 "search.graphs=[c]", "search.clusters=[two]", "search.seconds=1", "search.updates=1",
                 "targets.cluster=two", "targets.profiles=[c]", "targets.microbatches=4", "microbatches=[4]",
                 "search.microbatches=[4]"]
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        first = bench_pipeline(compose(config_name="bench_pipeline", overrides=overrides))
        report = (tmp_path / "PIPELINE.md").read_text()
        again = bench_pipeline(compose(config_name="bench_pipeline", overrides=[*overrides, "resume=true"]))
    assert again == first and (tmp_path / "PIPELINE.md").read_text() == report
    assert {r.method for r in first} >= {"ideal_dp", "ilp", "list_scheduling", "list_scheduling_warm"}
    assert "Warm-started search never worse than the DP: met (2 of 2 cases)" in report
    assert "| c | 4 | 2xgpu | gpipe | 4 |" in report and "## Notes" in report
    assert "**3x on 2 GPUs, M = 4** (2xgpu;" in report  # the target cluster's GPUs, not a fixed 4


def test_a_pipe_or_line_break_in_a_name_keeps_the_pipeline_table_whole():
    """PIPELINE.md's table broke on a graph named ``net|v2`` (a cell more) or a cluster name with a line break."""
    import re

    records = [PipelineRecord("net|v2", "a\nb", "1f1b", 4, m, ms / 1e3, 0.001, 0.0, False, num_ops=10,
                              stage_devices=2) for m, ms in (("single_gpu", 8.0), ("gpipe", 4.0))]
    rows = [line for line in pipeline_report(records).splitlines() if line.startswith("| ")]
    assert len({len(re.split(r"(?<!\\)\|", row)) for row in rows[:2]}) == 1
    assert rows[1].startswith("| net\\|v2 | 10 | a b |")
    assert "| net\\|v2 (10) |" in pipeline_report(records)


def test_a_method_that_did_not_run_on_the_largest_graph_has_no_seconds_there() -> None:
    """PIPELINE.md's placing-time table printed ``nan`` for a method with no record on the largest graph (a
    learned search run on a smaller graph only)."""
    records = [_record("single_gpu", 8.0), _record("s", 4.0),
               PipelineRecord("big", "c", "1f1b", 4, "single_gpu", 0.01, 0.001, 0.5, False, num_ops=99)]
    report = pipeline_report(records)
    assert "| s | 0.00 | big (99) | - |" in report and "| single_gpu | 0.50 | big (99) | 0.50 |" in report
    assert "nan" not in report


def test_targets_name_the_clusters_gpus_and_leave_no_clause_without_its_list() -> None:
    """The 3x target's heading said "on 4 GPUs" on any cluster; the DP and 10,000-op targets ended in "the largest
    gaps:" / "slowest placement per method there:" with nothing after them when there was nothing to list."""
    records = [_record("single_gpu", 8.0), _record("gpipe", 4.0), _record("ideal_dp", 4.0)]
    targets = targets_section(records, {}, cluster="c", microbatches=4, profiles=["g"], gpus=2)
    assert "**3x on 2 GPUs, M = 4** (c;" in targets and "4 GPUs" not in targets
    assert "beat ideal_dp's in 0 of 1 (case, method) pairs.\n" in targets and "largest gaps" not in targets
    assert "graphs of 10,000 ops or more: none.\n" in targets and "per method there" not in targets
    assert targets_section(records, {}, cluster="c", microbatches=4, profiles=[]).count("**3x, M = 4**") == 1


def test_a_bench_without_the_ilp_prints_no_ilp_table() -> None:
    """PIPELINE.md printed "ILP against the exact DP" with its header and no row when no ILP ran (found by a
    probe of the output files)."""
    records = [_record("single_gpu", 8.0), _record("ideal_dp", 4.0)]
    kwargs = dict(cluster="c", microbatches=4, profiles=["g"], gpus=2)
    assert "ILP against the exact DP" not in targets_section(records, {}, **kwargs)
    assert "| ilp | 1f1b | 1 | 1.333 |" in targets_section([*records, _record("ilp", 3.0)], {}, **kwargs)


def test_a_killed_bench_keeps_each_finished_pair_with_the_notes(tmp_path, monkeypatch) -> None:
    """Results were written once per graph (a pair logged done was lost with a kill before the graph's last cluster)
    and without the config's notes (a killed run's PIPELINE.md had lost them); now after each (graph, cluster)
    pair, saying they are partial; the interrupted line says the pipeline bench's searches start over."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    import gplace.bench.pipeline as bench
    from gplace.cli import resume_hint

    overrides = [f"out_dir={tmp_path}", "~graphs", "+graphs={c: {_target_: gplace.testing.chain, costs: [1, 2, 3, 1]}}",
                 "~clusters", "+clusters={two: {_target_: gplace.testing.uniform_cluster, num_devices: 2}, "
                 "three: {_target_: gplace.testing.uniform_cluster, num_devices: 3}}", "search.graphs=[]",
                 "search.clusters=[]",
                 "targets.cluster=two", "targets.profiles=[c]", "targets.microbatches=4", "microbatches=[4]",
                 "~learned", "+learned={}",
                 "notes=MY_NOTES"]
    real, calls = bench.run_pipeline_case, []

    def killed_on_the_second(*args, **kwargs):
        calls.append(args[1].name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(bench, "run_pipeline_case", killed_on_the_second)
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="bench_pipeline", overrides=overrides)
    with pytest.raises(KeyboardInterrupt):
        bench.bench_pipeline(cfg)
    held = json.loads((tmp_path / "pipeline_results.json").read_text())
    assert held and {r["cluster"] for r in held} == {calls[0]}
    report = (tmp_path / "PIPELINE.md").read_text()
    assert "**Partial**" in report and report.rstrip().endswith("MY_NOTES")
    hint = resume_hint("bench", OmegaConf.create({"out_dir": str(tmp_path), "pipeline": True, "resume": False}), None)
    assert "resume=true" in hint and "start over" in hint and "checkpoints" not in hint
