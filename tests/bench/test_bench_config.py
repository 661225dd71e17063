"""`gplace bench` and the pipeline bench from their configs: settings refused before anything runs, naming the key;
learned searches that run without a time limit and give one result whatever ran before them."""

import json
import logging
import re

import pytest
import torch

TINY = ["learned.seq2seq.overrides=['encoder=lstm','policy=seq2seq','encoder.hidden_size=16','policy.hidden_size=16',"
        "'policy.attention_size=8']", "~learned.seq2seq_warm", "search.updates=1", "search.plots=false"]
"""One small seq2seq search of one update."""


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> str:
    """A bench case: a 40-op random DAG on 4 GPUs, from files."""
    from gplace.ir.serialize import cluster_to_dict, graph_to_dict, save_json
    from gplace.testing import random_dag, uniform_cluster

    folder = tmp_path_factory.mktemp("case")
    save_json(graph_to_dict(random_dag(40, 0.08, 3)), folder / "graph.json")
    save_json(cluster_to_dict(uniform_cluster(4, bandwidth=1e9)), folder / "cluster.json")
    return (f"cases=[['graph=file','graph.path={folder / 'graph.json'}','cluster=file',"
            f"'cluster.path={folder / 'cluster.json'}']]")


def _bench(out_dir, *overrides):
    from hydra import compose, initialize_config_module

    from gplace.cli import bench

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        return bench(compose(config_name="bench", overrides=[f"out_dir={out_dir}", *overrides]))


def _pipeline(out_dir, *overrides, graphs="{c: {_target_: gplace.testing.chain, costs: [1, 2, 3, 1]}}",
              clusters="{two: {_target_: gplace.testing.uniform_cluster, num_devices: 2}}"):
    """The pipeline bench: a 4-op chain on 2 GPUs, one GPU and the exact DP, one search of one update."""
    from hydra import compose, initialize_config_module

    from gplace.bench.pipeline import bench_pipeline

    base = ["~graphs", f"+graphs={graphs}", "~clusters", f"+clusters={clusters}", "~placers",
            "+placers={single_gpu: {_target_: gplace.baselines.SingleDevice, kind: gpu}, ideal_dp: "
            "{_target_: gplace.baselines.pipeline.IdealDPPartitioner, microbatches: 4}}",
            "~learned.list_scheduling_stage", "~learned.list_scheduling_stage_refined", "search.graphs=[c]",
            "search.clusters=[two]", "search.updates=1",
            "targets.cluster=two", "targets.profiles=[c]", "targets.microbatches=4", "microbatches=[4]",
            "search.microbatches=[4]",
            "schedules=[gpipe]", "search.schedules=[gpipe]"]
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="bench_pipeline", overrides=[f"out_dir={out_dir}", *base, *overrides])
        return bench_pipeline(cfg)


def test_search_seconds_null_runs_the_searches_without_a_time_limit(tmp_path, case):
    """It was accepted, then passed on as the text 'None' (trainer.max_seconds=None), which the trainer refused."""
    records = _bench(tmp_path, case, *TINY, "search.seconds=null")
    assert [r.failed for r in records if r.method == "seq2seq"] == [False]


def test_pipeline_search_seconds_null_runs_the_searches_without_a_time_limit(tmp_path):
    """Every search was recorded as failed: "max_seconds must be a float or None, got 'None'"."""
    records = _pipeline(tmp_path, "search.seconds=null")
    assert {(r.method, r.failed) for r in records if "list_scheduling" in r.method} == {
        ("list_scheduling", False), ("list_scheduling_warm", False)}


def test_a_pipeline_search_with_refine_passes_it_to_place(tmp_path, caplog):
    """``refine=S`` in a learned search's overrides reaches :func:`gplace.place`, which descends after the cold
    and the warm search."""
    caplog.set_level(logging.INFO, logger="gplace.experiment")
    records = _pipeline(tmp_path, "~learned.list_scheduling",
                        "+learned.refined={overrides: ['encoder=gnn', 'policy=list_scheduling', 'refine=0.5']}")
    assert {(r.method, r.failed) for r in records if "refined" in r.method} == {
        ("refined", False), ("refined_warm", False)}
    assert sum(r.getMessage().startswith("refine: ") for r in caplog.records) == 2


def _curve(out_dir) -> list[float]:
    run = next((out_dir / "runs").glob("*-seq2seq"))
    return [json.loads(line)["rollout/mean_step_time"] for line in (run / "metrics.jsonl").read_text().splitlines()
            if '"rollout/mean_step_time"' in line]


def test_two_benches_give_identical_learned_results_whatever_ran_before(tmp_path, case):
    """The networks were built before place() seeded torch: their initial weights, and so the search, depended on
    what had drawn from torch's generator before (an earlier case, an earlier bench in the process)."""
    results = []
    for seed in (1, 2):  # whatever ran before leaves torch's generator somewhere else
        torch.manual_seed(seed)
        records = _bench(tmp_path / str(seed), case, *TINY, "search.updates=3")
        found = [(r.step_time, r.samples) for r in records if r.method == "seq2seq"]
        results.append((found, _curve(tmp_path / str(seed))))
    assert results[0] == results[1] and len(results[0][1]) == 3


def test_pipeline_searches_start_from_the_same_weights_whatever_ran_before(tmp_path, monkeypatch):
    """The pipeline bench built its searches' networks unseeded too (each call, cold and warm, from wherever
    torch's generator was)."""
    weights = []

    def place(graph, cluster, *, encoder, policy, **kwargs):
        weights.append([p.detach().clone() for p in encoder.parameters()])
        raise RuntimeError("stop here: the initial weights are what this test looks at")

    monkeypatch.setattr("gplace.experiment.place", place)
    for seed in (1, 2):
        torch.manual_seed(seed)
        _pipeline(tmp_path / str(seed))
    assert len(weights) == 4  # cold and warm, in two benches
    assert all(torch.equal(a, b) for other in weights[1:] for a, b in zip(weights[0], other, strict=True))


@pytest.mark.parametrize(("override", "message"), [
    ("+policy.bogus=1", r"learned\.seq2seq: Seq2SeqPolicy.* unexpected keyword argument 'bogus'"),
    ("policy.hidden_size=0", r"learned\.seq2seq: Seq2SeqPolicy: hidden_size must be a whole number >= 1, got 0"),
    ("policy=nosuch", r"learned\.seq2seq: In 'config': Could not find 'policy/nosuch'$"),
])
def test_a_learned_search_that_does_not_build_is_refused_before_any_baseline_runs(tmp_path, case, override, message):
    """It was recorded as a failed result (exit status 0), which a resumed bench then kept for good."""
    overrides = TINY[0][:-1] + f",'{override}']"
    with pytest.raises(ValueError, match=message):
        _bench(tmp_path, case, overrides, *TINY[1:])
    assert not (tmp_path / "results.json").exists()


def test_a_pipeline_search_that_does_not_build_is_refused_before_any_placer_runs(tmp_path):
    with pytest.raises(ValueError, match=r"learned\.list_scheduling: .*unexpected keyword argument 'bogus'"):
        _pipeline(tmp_path, "learned.list_scheduling.overrides=['encoder=gnn','policy=list_scheduling',"
                            "'+policy.bogus=1']")
    assert not (tmp_path / "pipeline_results.json").exists()


@pytest.mark.parametrize(("override", "message"), [
    ("~learned.seq2seq.warm_start", "learned.seq2seq.warm_start must be true (start from the best baseline's "
                                    "placement) or false, got nothing"),
    ("learned.seq2seq.warm_start=maybe", "learned.seq2seq.warm_start must be true (start from the best baseline's "
                                         "placement) or false, got 'maybe'"),
    ("learned.seq2seq.overrides='encoder=lstm'", "learned.seq2seq.overrides must be a list of overrides of the main "
                                               "config, e.g. [encoder=gnn, policy=list_scheduling], got "
                                               "'encoder=lstm'"),
    ("+learned.seq2seq.seconds=3", "learned.seq2seq.seconds: unknown setting (a search takes overrides, warm_start)"),
    ("learned=null", "learned must map each learned search's name to its settings (overrides, warm_start; "
                     "none: '~learned' '+learned={}' on the command line, where learned={} merges into the "
                     "config's searches), got None"),
    ("+learned.heft={overrides: [], warm_start: false}", "learned.heft: a learned search named like baselines.heft"),
    ("cases=[]", "cases must list at least one case, each a list of overrides of the main config"),
    ("cases=['graph=lstm_lm']", "cases[0] must be a list of overrides of the main config"),
])
def test_malformed_bench_settings_are_named_before_any_baseline_runs(tmp_path, case, override, message):
    """A learned search without warm_start, or learned=null, ended in a traceback (the first after every baseline
    had run); a search named like a baseline hid it; cases=[] ran nothing and said it wrote the results."""
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        _bench(tmp_path, case, *TINY, override)
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize(("overrides", "message"), [
    ({"clusters": "{slow: {_target_: gplace.testing.uniform_cluster, bandwidth: 1000.0}, two: "
                  "{_target_: gplace.testing.uniform_cluster}}"},
     r"clusters\.slow and clusters\.two are both named '2xgpu'"),
    ({"graphs": "{}"}, r"graphs must list at least one entry, got \{\}"),
    ({"clusters": "{}"}, r"clusters must list at least one entry, got \{\}"),
])
def test_pipeline_settings_that_cannot_work_are_named_before_anything_runs(tmp_path, overrides, message):
    """Two clusters of one name ran, and one's rows vanished from PIPELINE.md; no graph or cluster ended in
    'max() arg is an empty sequence'."""
    with pytest.raises(ValueError, match=message):
        _pipeline(tmp_path, "learned={}", **overrides)
    assert not (tmp_path / "pipeline_results.json").exists()


@pytest.mark.parametrize(("override", "message"), [
    ("+learned.ideal_dp={overrides: []}", r"learned\.ideal_dp: its records \(ideal_dp, ideal_dp_warm\) would be "
                                          r"named like placers\.ideal_dp"),
    ("+learned.list_scheduling_warm={overrides: []}", r"learned\.list_scheduling_warm: .* would be named like "
                                                      r"learned\.list_scheduling's"),
])
def test_a_pipeline_search_named_like_another_method_is_refused(tmp_path, override, message):
    """A search's records (cold, and `_warm`) named like a placer's, or another search's, hid them in the report."""
    with pytest.raises(ValueError, match=message):
        _pipeline(tmp_path, override)


def test_a_pipeline_resume_measures_again_what_an_older_simulator_measured(tmp_path, caplog):
    """Records say which simulator measured them (pipe-v1 before the field): a resume kept pipe-v1's records and
    labelled every table "pipe-v1" though the rows it added were another simulator's."""
    import dataclasses
    import logging

    from gplace.bench.pipeline import load_pipeline_records, write_pipeline_results
    from gplace.pipeline import PipelineSimulator

    first = _pipeline(tmp_path, "learned={}")
    assert {r.model for r in first} == {PipelineSimulator.semantics} == {"pipe-v3"}
    old = [dataclasses.replace(r, model="pipe-v1", minibatch_time=123.0) for r in first]
    write_pipeline_results(old, tmp_path, plot=False)
    with caplog.at_level(logging.WARNING, logger="gplace.bench"):
        again = _pipeline(tmp_path, "learned={}", "resume=true")
    def timeless(records):
        return [dataclasses.replace(r, search_seconds=0.0) for r in records]

    assert timeless(again) == timeless(first) == timeless(load_pipeline_records(tmp_path / "pipeline_results.json"))
    assert any("measured by pipe-v1 are measured again by pipe-v3" in r.getMessage() for r in caplog.records)
    report = (tmp_path / "PIPELINE.md").read_text()
    assert "Measured by pipe-v3," in report and "Measured by pipe-v1" not in report


def test_a_pipeline_resume_refuses_to_drop_an_older_simulators_records_of_pairs_it_does_not_measure(tmp_path):
    """A resume over an older file measured again the pairs of its config and dropped every other record (2,108
    of 2,112 for a resume cut to one pair) without a word."""
    import dataclasses

    from gplace.bench.pipeline import load_pipeline_records, write_pipeline_results

    first = _pipeline(tmp_path, "learned={}")
    old = [dataclasses.replace(r, model="pipe-v1", cluster="elsewhere") for r in first]
    write_pipeline_results(old, tmp_path, plot=False)
    with pytest.raises(ValueError, match=r"measured by pipe-v1 \(an older simulator\) of 1 \(graph, cluster\) pairs "
                                         r"this run does not measure \(.* on elsewhere\); a resume would drop them"):
        _pipeline(tmp_path, "learned={}", "resume=true")
    assert load_pipeline_records(tmp_path / "pipeline_results.json") == old


def test_a_pipeline_resume_measures_again_a_graph_or_cluster_changed_under_its_name(tmp_path, caplog):
    """Records were keyed by graph and cluster name: a resume kept a graph's records after its costs changed and
    skipped it (a cluster of another bandwidth likewise: one check, stale_reason, tested in tests/test_bench.py)."""
    import dataclasses
    import logging

    from gplace.bench.pipeline import load_pipeline_records, write_pipeline_results
    from gplace.testing import chain, uniform_cluster

    first = _pipeline(tmp_path, "learned={}")
    assert _pipeline(tmp_path, "learned={}", "resume=true") == first  # unchanged: skipped, as it was
    with caplog.at_level(logging.WARNING, logger="gplace.bench"):
        changed = _pipeline(tmp_path, "learned={}", "resume=true",
                            graphs="{c: {_target_: gplace.testing.chain, costs: [1, 2, 3, 5]}}")
    assert all(a.minibatch_time > b.minibatch_time for a, b in zip(changed, first, strict=True))
    assert any("c on 2xgpu measured again" in r.getMessage() and "another graph" in r.getMessage()
               for r in caplog.records)
    graph, cluster = chain((1, 2, 3, 1)), uniform_cluster(2)
    assert {(r.graph_fingerprint, r.cluster_fingerprint) for r in first} == {(graph.fingerprint, cluster.fingerprint)}
    assert {r.graph_fingerprint for r in changed} == {chain((1, 2, 3, 5)).fingerprint} != {graph.fingerprint}
    assert load_pipeline_records(tmp_path / "pipeline_results.json") == changed
    write_pipeline_results([dataclasses.replace(r, graph_fingerprint=None, cluster_fingerprint=None) for r in first],
                           tmp_path, plot=False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gplace.bench"):
        redone = _pipeline(tmp_path, "learned={}", "resume=true")
    assert {r.graph_fingerprint for r in redone} == {graph.fingerprint}
    assert any("written before records kept" in r.getMessage() for r in caplog.records)


def test_a_resume_keeping_records_without_fingerprints_of_cases_it_did_not_run_says_so(tmp_path, case, caplog):
    """Such records (written before records kept fingerprints) were kept beside today's rows without a word: one
    K80 read 87.56 ms in an old lstm_lm row and 95.81 ms in today's."""
    import dataclasses
    import logging

    from gplace.bench.report import write_results
    from gplace.bench.runner import load_records

    first = _bench(tmp_path, case, *TINY)
    old = [dataclasses.replace(r, cluster="elsewhere", graph_fingerprint=None, cluster_fingerprint=None)
           for r in first]
    write_results([*first, *old], tmp_path)
    with caplog.at_level(logging.WARNING, logger="gplace.bench"):
        _bench(tmp_path, case, *TINY, "resume=true")
    [warning] = [r.getMessage() for r in caplog.records if "before records kept fingerprints" in r.getMessage()]
    assert "keeps the records of 1 (graph, cluster) pairs this bench did not run" in warning
    assert f"({first[0].graph} on elsewhere)" in warning
    assert len(load_records(tmp_path / "results.json")) == len(first) + len(old)  # kept, not dropped
