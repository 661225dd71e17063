"""`gplace bench` refuses cases whose graphs cannot be built before any case runs; its messages' examples work."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.override_parser.overrides_parser import OverridesParser

from gplace import cli

ROOT = Path(__file__).resolve().parents[1]
TINY = "['graph=lstm_lm','cluster=paper_2gpu','graph.steps=2','graph.hidden=64','graph.vocab=100']"


def _bench_config(name: str, *overrides: str):
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name=name, overrides=list(overrides))
        cases = cli._check_cases(cfg.cases)
        return cfg, [cli._compose_case(case, cfg, f"cases[{i}]")[0] for i, case in enumerate(cases)]


def _labelled(configs):
    return [(f"cases[{i}]", c.graph) for i, c in enumerate(configs)]


def test_the_example_for_empty_cases_parses_as_typed_in_a_shell():
    """The example was cases=[[graph=lstm_lm,cluster=paper_2gpu]], which Hydra's override parser rejects."""
    with pytest.raises(ValueError, match="cases must list at least one case") as err:
        cli._check_cases([])
    example = re.search(r"e\.g\. (.+?)\), got", str(err.value)).group(1)
    [override] = OverridesParser.create().parse_overrides(shlex.split(example))
    assert override.key_or_group == "cases" and override.value() == [["graph=lstm_lm", "cluster=paper_2gpu"]]


def test_a_late_case_whose_graph_file_is_missing_is_refused_before_the_first_case_runs(tmp_path):
    """The graphs were built case by case: the first case's baselines and searches ran, then the bench died."""
    missing = tmp_path / "noshared" / "graphs" / "none" / "graph.txt"
    args = [sys.executable, "-m", "gplace", "bench", f"out_dir={tmp_path / 'out'}", f"hydra.run.dir={tmp_path / 'h'}",
            f"cases=[{TINY},['graph=file','graph.path=${{shared}}/graphs/none/graph.txt','cluster=paper_4gpu']]",
            f"shared={tmp_path / 'noshared'}", "search.seconds=1", "search.updates=1", "search.plots=false"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"cases[1]: no such file {missing}" in proc.stderr and "GPLACE_SHARED" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out" / "results.json").exists()


def test_two_cases_of_one_graph_and_cluster_are_refused_before_either_runs():
    """The second case of a pair was found only once built, after the first had run its baselines and searches;
    a case differing only in how it is written (one override's order) is the same case."""
    same = TINY.replace("'graph.steps=2','graph.hidden=64'", "'graph.hidden=64','graph.steps=2'")
    _, configs = _bench_config("bench", f"cases=[{TINY},['graph=lstm_lm','cluster=paper_4gpu'],{same}]")
    with pytest.raises(ValueError, match=r"^cases\[0\] and cases\[2\] place the same graph on the same cluster"):
        cli._check_distinct_cases(configs)
    cli._check_distinct_cases(configs[:2])


def test_bench_papers_shared_graphs_are_checked_naming_each_case_and_how_to_find_them(tmp_path):
    cfg, configs = _bench_config("bench_paper", f"shared={tmp_path}")
    with pytest.raises(ValueError, match=r"^7 bench graph\(s\) cannot be built") as err:
        cli._check_graph_files(_labelled(configs), cfg)
    assert f"cases[6]: no such file {tmp_path}/graphs/pipedream/profiles/alexnet/graph.txt" in str(err.value)
    assert "cases[5]" not in str(err.value) and "set GPLACE_SHARED=" in str(err.value)


@pytest.mark.skipif(not (ROOT.parent / "shared" / "graphs").is_dir(), reason="no ../shared graphs beside the repo")
def test_bench_papers_graph_files_are_all_under_the_shared_folder():
    cfg, configs = _bench_config("bench_paper", f"shared={ROOT.parent / 'shared'}")
    cli._check_graph_files(_labelled(configs), cfg)


def test_a_case_whose_graph_misses_a_value_is_refused_naming_it(tmp_path):
    cfg, configs = _bench_config("bench", "cases=[['graph=file'],['graph=onnx',"
                                 f"'graph.model_or_path={tmp_path}/m.onnx']]")
    with pytest.raises(ValueError, match="2 bench graph") as err:
        cli._check_graph_files(_labelled(configs), cfg)
    assert "cases[0]: graph.path is not set" in str(err.value)
    assert f"cases[1]: no such file {tmp_path}/m.onnx" in str(err.value) and "GPLACE_SHARED" not in str(err.value)


@pytest.mark.parametrize("override, message", [
    ("+graph.optimizer=sgd", "An item is already at 'graph.optimizer'"),  # a key the graph's config has
    ("graph.hiden=5", "Could not override 'graph.hiden'"),  # a typo
])
def test_a_case_override_hydra_refuses_is_one_error_naming_the_case(override, message):
    """It ended in Hydra's "Error executing job with overrides: [...]" and its text, exit 1, naming no case."""
    with pytest.raises(ValueError) as err:
        _bench_config("bench", f"cases=[{TINY},{TINY[:-1]},'{override}']]")
    assert str(err.value).startswith("cases[1]: ") and message in str(err.value) and "\n" not in str(err.value)


def test_a_nested_path_of_a_torch_module_is_not_taken_for_a_graph_file():
    """The check looked for path-like keys at any depth: a module's own argument (a hub id) was refused."""
    cfg, configs = _bench_config("bench", "cases=[['graph=torch','graph.module._target_=torch.nn.Identity',"
                                 "'+graph.module.path=org/model-name','graph.input_shapes=[[1,4]]']]")
    cli._check_graph_files(_labelled(configs), cfg)


def test_a_case_or_search_with_a_pipeline_objective_is_refused():
    """bench built each case's runtime from `runtime` alone: objective=pipeline was measured as sim-v1 steps, its
    baselines, lower bound and learned searches too, without a word."""
    cfg, configs = _bench_config("bench", f"cases=[{TINY},{TINY[:-1]},'objective=pipeline']]")
    cli._check_step_objective(configs[0], "cases[0]")
    with pytest.raises(ValueError, match=r"cases\[1\]: objective=pipeline, but gplace bench measures one step.*"
                                         "bench_pipeline"):
        cli._check_step_objective(configs[1], "cases[1]")
    overrides = ["learned.seq2seq.overrides=['encoder=lstm','policy=seq2seq','objective=pipeline_steady']"]
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="bench", overrides=[f"cases=[{TINY}]", *overrides])
        case, composed = cli._compose_case(cli._check_cases(cfg.cases)[0], cfg, "cases[0]")
        with pytest.raises(ValueError, match=r"learned.seq2seq: objective=pipeline_steady"):
            cli._plan_case(case, composed, cfg)


def test_a_search_with_refine_is_refused_before_anything_runs():
    """Every baseline ran, then the search was recorded as failed: refine descends on a pipelined mini-batch's
    time, which this bench does not measure."""
    overrides = ["learned.seq2seq.overrides=['encoder=lstm','policy=seq2seq','refine=1']"]
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="bench", overrides=[f"cases=[{TINY}]", *overrides])
        case, composed = cli._compose_case(cli._check_cases(cfg.cases)[0], cfg, "cases[0]")
        with pytest.raises(ValueError, match=r"learned.seq2seq: refine=1 descends on a pipelined mini-batch's time, "
                                             "but gplace bench measures one step.*bench_pipeline"):
            cli._plan_case(case, composed, cfg)


def test_the_pipeline_benchs_shared_graphs_are_checked_and_how_to_find_them_said(tmp_path, capsys):
    """Without the shared graphs bench_pipeline said only "FileNotFoundError: ... alexnet/graph.txt", where
    bench_paper names every case and GPLACE_SHARED; the DOPPLER graphs (inside without_activation_memory) too."""
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="bench_pipeline", overrides=[f"shared={tmp_path}", f"out_dir={tmp_path / 'out'}"])
    with pytest.raises(SystemExit) as exit_:
        cli._guard(lambda: cli.bench(cfg), cfg, "bench")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("gplace: error: ValueError: 13 bench graph(s) cannot be built: graphs.alexnet: no such file")
    assert f"graphs.chain_mm: no such file {tmp_path}/graphs/doppler/chain_mm_112nodes.txt" in err
    assert "zoo_" not in err and "set GPLACE_SHARED=" in err


@pytest.mark.parametrize("override", ["cluster=paper_4gpu", "graph=rnnlm", "runtime=torch", "warm_start=heft",
                                      "+foo=1", "threads=2"])
def test_a_search_override_the_bench_does_not_read_is_refused(override):
    """['cluster=paper_4gpu'], ['warm_start=heft'] or ['+foo=1'] in a learned search's overrides ran exactly as
    without them."""
    from gplace.bench.searches import SEARCH_KEYS, check_learned

    learned = {"mine": {"overrides": ["encoder=lstm", override], "warm_start": False}}
    with pytest.raises(ValueError, match=re.escape(f"learned.mine: {override!r}")):
        check_learned(learned, tuple(SEARCH_KEYS))
    for fine in ("+trainer.x=1", "++max_groups=64", "++seed=3"):  # ++ forces a key that exists: read
        check_learned({"mine": {"overrides": ["encoder=lstm", fine], "warm_start": False}}, tuple(SEARCH_KEYS))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_a_search_on_a_device_the_machine_lacks_is_refused_before_the_bench_runs():
    """device=cuda in a case or a search's overrides was ignored: the networks stayed on the CPU."""
    from gplace.bench.searches import prepare_search

    with (initialize_config_module(config_module="gplace.conf", version_base="1.3"),
          pytest.raises(ValueError, match=r"learned.s: .*device='cuda': this machine has no CUDA device")):
        prepare_search("s", ["device=cuda"], [2])


@pytest.mark.parametrize("out_dir", ["", " "])
def test_an_empty_out_dir_is_refused(tmp_path, capsys, out_dir):
    """out_dir='' wrote RESULTS.md, results.json and runs/ into the working directory, logging "/RESULTS.md"."""
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="bench", overrides=[f"out_dir='{out_dir}'"])
    with pytest.raises(SystemExit) as exit_:
        cli._guard(lambda: cli.bench(cfg), cfg, "bench")
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (f"gplace: error: out_dir={out_dir!r} names no folder: give one with "
                                       "out_dir=/path/to/dir\n")


def test_a_search_setting_the_bench_does_not_know_is_refused():
    """+search.second=60 (for seconds) was ignored: the searches ran for the default 300 s."""
    from gplace.bench.searches import check_search

    with pytest.raises(ValueError, match=r"^search.second: unknown setting \(search takes updates, seconds, plots\)"):
        check_search({"updates": 1, "seconds": 1, "plots": True, "second": 60})


def test_pipeline_bench_settings_of_the_wrong_kind_are_one_line(tmp_path, capsys):
    """microbatches=4 failed in a loop ('int' object is not iterable); pipeline=maybe was taken as true and the whole
    pipeline bench started."""
    from gplace.bench.pipeline import _check_pipeline_config

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        scalar = compose(config_name="bench_pipeline", overrides=["microbatches=4"])
        maybe = compose(config_name="bench_pipeline", overrides=["pipeline=maybe", f"out_dir={tmp_path / 'out'}"])
    with pytest.raises(ValueError, match=re.escape("microbatches must be a list, e.g. microbatches=[4], got 4")):
        _check_pipeline_config(scalar)
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        searched = compose(config_name="bench_pipeline", overrides=["search.schedules=gpipe"])
    with pytest.raises(ValueError, match=re.escape("search.schedules must be a list, e.g. search.schedules=[gpipe]")):
        _check_pipeline_config(searched)  # a string was looped over one letter at a time
    with pytest.raises(SystemExit):
        cli._guard(lambda: cli.bench(maybe), maybe, "bench")
    assert capsys.readouterr().err == "gplace: error: pipeline must be true or false, got 'maybe'\n"
