"""From a probe of the pipeline bench: a resume kept results measured with other placers or micro-batch counts
(and measured none of the new ones) without a word; a search or target at a micro-batch count the bench does not
measure was turned off silently; the report printed "nanx" and a "met" over a DP never run."""

from __future__ import annotations

import logging

import pytest

BASE = ["~graphs", "+graphs={c: {_target_: gplace.testing.chain, costs: [1, 2, 3, 1]}}", "~clusters",
        "+clusters={two: {_target_: gplace.testing.uniform_cluster, num_devices: 2}}", "~placers",
        "+placers={single_gpu: {_target_: gplace.baselines.SingleDevice, kind: gpu}, gpipe: "
        "{_target_: gplace.baselines.pipeline.GPipePartitioner, microbatches: 4}}", "~learned", "+learned={}",
        "search.graphs=[]", "search.clusters=[]", "targets.cluster=two", "targets.profiles=[c]",
        "targets.microbatches=4", "microbatches=[4]", "schedules=[gpipe]"]


def _bench(out_dir, *overrides):
    from hydra import compose, initialize_config_module

    from gplace.bench.pipeline import bench_pipeline

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        return bench_pipeline(compose(config_name="bench_pipeline",
                                      overrides=[f"out_dir={out_dir}", *BASE, *overrides]))


def test_a_resume_measures_again_a_pair_set_otherwise(tmp_path, caplog):
    first = _bench(tmp_path)
    assert _bench(tmp_path, "resume=true") == first
    with caplog.at_level(logging.WARNING, logger="gplace.bench.pipeline"):
        again = _bench(tmp_path, "resume=true", "microbatches=[4,8]")
    assert "set otherwise than when measured" in caplog.text
    assert {r.microbatches for r in again} == {4, 8}


def test_a_target_at_a_count_the_bench_does_not_measure_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"targets.microbatches lists \[16\], which microbatches=\[4\] lacks"):
        _bench(tmp_path, "targets.microbatches=16")


def test_the_report_says_a_dp_never_run_was_not_measured(tmp_path):
    _bench(tmp_path)
    report = (tmp_path / "PIPELINE.md").read_text()
    assert "nan" not in report


def test_every_pair_keeps_its_digest_and_a_resume_skips_them_all(tmp_path, caplog):
    """The first pair's records were bound to the name of the digest, so every later pair kept a list of records
    as its digest, and a resume measured it again."""
    graphs = "+graphs={c: {_target_: gplace.testing.chain, costs: [1, 2, 3, 1]}, d: {_target_: gplace.testing.chain}}"
    first = _bench(tmp_path, "~graphs", graphs)
    assert {r.graph for r in first} == {"c", "d"}
    assert all(isinstance(r.settings, str) for r in first)
    with caplog.at_level(logging.WARNING, logger="gplace.bench.pipeline"):
        assert _bench(tmp_path, "~graphs", graphs, "resume=true") == first
    assert "measured again" not in caplog.text
