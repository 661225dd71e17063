"""`gplace bench` refuses a case's override of a key the bench sets itself (its searches' budget, logger, progress
bar, warm start, threads), naming the case, the key and where to set it, before anything runs: the bench replaced
them after the case's overrides, or read them nowhere."""

import pytest

TINY = "'graph=lstm_lm','graph.steps=2','graph.hidden=64','graph.vocab=100'"


def _bench(out_dir, *overrides):
    from hydra import compose, initialize_config_module

    from gplace.cli import bench

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        return bench(compose(config_name="bench", overrides=[f"out_dir={out_dir}", *overrides]))


@pytest.mark.parametrize("override, where", [
    ("trainer.updates=5", "search.updates=N"),
    ("trainer.max_seconds=60", "search.seconds=S"),
    ("++trainer.progress=true", "learned.<name>.overrides"),
    ("logger=none", "a bench keeps no logger"),
    ("warm_start=heft", "learned.<name>.warm_start=true|false"),
    ("threads=4", "threads=N on the bench's command line"),
])
def test_a_case_setting_what_the_bench_sets_is_refused_before_anything_runs(tmp_path, override, where):
    out = tmp_path / "out"
    with pytest.raises(ValueError) as err:
        _bench(out, f"cases=[[{TINY},'cluster=paper_2gpu'],[{TINY},'cluster=paper_4gpu','{override}']]",
               "search.updates=1", "search.plots=false")
    key = override.lstrip("+").split("=")[0]
    assert str(err.value).startswith(f"cases[1]: {override!r} is not read from a case: the bench sets {key} ")
    assert where in str(err.value)
    assert not (out / "results.json").exists() and not (out / "runs").exists()


def test_a_case_may_set_what_its_searches_read():
    from gplace.cli import _check_cases

    case = ["graph=lstm_lm", "cluster=paper_2gpu", "trainer=ppo", "trainer.lr=1e-3", "seed=4", "max_groups=32",
            "encoder.hidden_size=16"]
    assert _check_cases([case]) == [case]
