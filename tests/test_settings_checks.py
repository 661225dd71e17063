"""Settings of the wrong kind are refused where they are given, naming them, instead of being taken silently."""

import math
import os
import re
import subprocess
import sys

import pytest

from gplace.baselines import MSCT
from gplace.baselines.pipeline import GPipePartitioner, IdealDPPartitioner, PipelineILPPlacer
from gplace.encoders import GNNEncoder, LSTMEncoder
from gplace.hierarchical import LearnedGrouper
from gplace.importers import load_pipedream
from gplace.policies import GDPPolicy, ListSchedulingPolicy, MLPPolicy, Seq2SeqPolicy, SuperpositionPolicy
from gplace.runtime import Simulator
from gplace.runtime.batch import check_threads
from gplace.runtime.cache import CachedRuntime
from gplace.training import EMABaseline

GRAPH_TXT = ("node1 -- Input0 -- forward_compute_time=1.000, backward_compute_time=0.000, activation_size=8.000, "
             "parameter_size=0.000\nnode2 -- ReLU() -- forward_compute_time=1.000, backward_compute_time=1.000, "
             "activation_size=8.000, parameter_size=0.000\n\tnode1 -- node2\n")


def _gplace(*args, cwd):
    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _torch_runtime(**kwargs):
    from gplace.runtime import TorchRuntime

    return TorchRuntime(**kwargs)


@pytest.mark.parametrize("make, name", [
    (lambda: ListSchedulingPolicy(stage_features="no"), "ListSchedulingPolicy: stage_features"),
    (lambda: CachedRuntime(Simulator(), cache_nondeterministic="no"), "CachedRuntime: cache_nondeterministic"),
    (lambda: CachedRuntime(Simulator(), keep_op_times="false"), "CachedRuntime: keep_op_times"),
    (lambda: PipelineILPPlacer(overlap="no"), "PipelineILPPlacer: overlap"),
    (lambda: IdealDPPartitioner(overlap="off"), "IdealDPPartitioner: overlap"),
    (lambda: GPipePartitioner(overlap="no"), "GPipePartitioner: overlap"),
    (lambda: _torch_runtime(enforce_memory="no"), "TorchRuntime: enforce_memory"),
])
def test_a_yes_no_setting_given_as_text_is_refused_naming_it(make, name):
    """'no', 'false' and 'off' were taken as true (a non-empty string), silently."""
    with pytest.raises(ValueError, match=f"{name} must be true or false, got '"):
        make()


@pytest.mark.parametrize("flag", ["training", "phases"])
def test_load_pipedreams_flags_given_as_text_are_refused_naming_them(tmp_path, flag):
    """load_pipedream(training='no') counted the backward time; phases='no' split every layer."""
    path = tmp_path / "tiny" / "graph.txt"
    path.parent.mkdir()
    path.write_text(GRAPH_TXT)
    assert load_pipedream(path, **{flag: False}).num_ops == 2
    with pytest.raises(ValueError, match=f"load_pipedream: {flag} must be true or false, got 'no'"):
        load_pipedream(path, **{flag: "no"})


@pytest.mark.parametrize("make, message", [
    (lambda: Seq2SeqPolicy(2, state_size=-1), "Seq2SeqPolicy: state_size must be a whole number >= 1, got -1"),
    (lambda: Seq2SeqPolicy(2, state_size=0), "Seq2SeqPolicy: state_size must be a whole number >= 1, got 0"),
    (lambda: ListSchedulingPolicy(state_size=0), "ListSchedulingPolicy: state_size must be a whole number >= 1"),
    (lambda: ListSchedulingPolicy(state_size=-1), "ListSchedulingPolicy: state_size must be a whole number >= 1"),
    (lambda: MLPPolicy(2, state_size="abc"), "MLPPolicy: state_size must be a whole number >= 1, got 'abc'"),
    (lambda: MLPPolicy("2", state_size=8), "MLPPolicy: num_devices must be a whole number >= 1, got '2'"),
])
def test_a_policys_state_size_is_checked_naming_it(make, message):
    """A negative state size ended in a torch traceback, 0 was accepted (and failed at the first sample), and a
    string gave a TypeError from a comparison."""
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("make, message", [
    (lambda: LSTMEncoder(hidden_size=64.0), "LSTMEncoder: hidden_size must be a whole number >= 1, got 64.0"),
    (lambda: LSTMEncoder(hidden_size="abc"), "LSTMEncoder: hidden_size must be a whole number >= 1, got 'abc'"),
    (lambda: GNNEncoder(hidden_size=64.0), "GNNEncoder: hidden_size must be a whole number >= 1, got 64.0"),
    (lambda: GNNEncoder(hidden_size="abc"), "GNNEncoder: hidden_size must be a whole number >= 1, got 'abc'"),
    (lambda: GNNEncoder(num_layers=2.0), "GNNEncoder: num_layers must be a whole number >= 1, got 2.0"),
    (lambda: GNNEncoder(conv="gat", heads=2.0), "GNNEncoder: heads must be a whole number >= 1, got 2.0"),
])
def test_an_encoders_sizes_must_be_whole_numbers(make, message):
    """A float size was accepted (or failed deep in torch), a string failed with "'<' not supported"."""
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("kwargs", [dict(prior_weight=math.nan), dict(prior_weight=math.inf),
                                    dict(prior_weight=-math.inf), dict(residual_bound=math.inf),
                                    dict(prior_weight="abc")])
def test_list_scheduling_weights_must_be_finite(kwargs):
    """A NaN or infinite prior weight or bound was accepted, and training then changed nothing."""
    (name, value), = kwargs.items()
    with pytest.raises(ValueError, match=f"ListSchedulingPolicy: {name} must be a finite number, got {value!r}"):
        ListSchedulingPolicy(**kwargs)
    assert ListSchedulingPolicy(residual_bound=None).residual_bound is None


def test_a_runtimes_thread_count_is_named_as_the_runtimes():
    """runtime.threads=0 read "threads must be ...", like the top-level threads (gplace: error: threads must be a
    whole number from 1 to ...)."""
    with pytest.raises(ValueError, match="^runtime: threads must be an integer >= 1 or None"):
        check_threads(0)
    with pytest.raises(ValueError, match="^Simulator: threads must be"):
        check_threads(-1, "Simulator")


def _pipeline_config(*overrides):
    from hydra import compose, initialize_config_module

    base = ["~graphs", "+graphs={c: {_target_: gplace.testing.chain, costs: [1, 2, 3, 1]}}", "~clusters",
            "+clusters={two: {_target_: gplace.testing.uniform_cluster, num_devices: 2}}", "search.graphs=[c]",
            "search.clusters=[two]", "targets.cluster=two", "targets.profiles=[c]"]
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        return compose(config_name="bench_pipeline", overrides=[*base, *overrides])


@pytest.mark.parametrize("override, message", [
    ("search.graphs=[c,d]", "search.graphs names d, not a key of graphs (its keys: c)"),
    ("search.clusters=[too]", "search.clusters names too, not a key of clusters (its keys: two)"),
    ("targets.cluster=too", "targets.cluster names too, not a key of clusters (its keys: two)"),
    ("targets.profiles=[e]", "targets.profiles names e, not a key of graphs (its keys: c)"),
    ("resume=no", "resume must be true or false, got 'no'"),
])
def test_a_pipeline_bench_name_that_is_no_graph_or_cluster_is_refused(tmp_path, override, message):
    """A misspelt name in search or targets turned the learned searches or the targets off, silently."""
    from gplace.bench.pipeline import bench_pipeline

    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bench_pipeline(_pipeline_config(f"out_dir={tmp_path}", override))
    assert not (tmp_path / "pipeline_results.json").exists()


@pytest.mark.parametrize("override, message", [
    ("resume=no", "gplace: error: resume must be true or false, got 'no'"),
    ("resume=abc", "gplace: error: resume must be true or false, got 'abc'"),
    ("search.plots=no", "gplace: error: search.plots must be true or false, got 'no'"),
    ("+unknown=1", "gplace: error: gplace bench reads no top-level setting unknown (given with +); the settings "
                   "of bench.yaml: baselines, cases,"),
])
def test_bench_refuses_a_yes_no_setting_given_as_text_and_an_unknown_key(tmp_path, override, message):
    """resume=no resumed and search.plots=no plotted (a non-empty string is true); +unknown=1 was ignored."""
    proc = _gplace("bench", f"out_dir={tmp_path / 'b'}", "cases=[['graph=file','graph.path=/nowhere/g.json']]",
                   override, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("command, override, message", [
    (["place", "method=heft"], "+max_groups=4", "gplace place reads no top-level setting max_groups (given with +); "
                                                "the settings of place.yaml: budget, checkpoint,"),
    (["place", "method=heft"], "+unknown=1", "gplace place reads no top-level setting unknown"),
    (["logger=none", "trainer.updates=1"], "+unknown=1", "gplace reads no top-level setting unknown (given with +); "
                                                         "the settings of config.yaml: cluster, device,"),
])
def test_a_top_level_key_the_command_does_not_read_is_refused(tmp_path, command, override, message):
    """`+max_groups=4` to gplace place (which Hydra's own struct error suggests) and `+unknown=1` were ignored."""
    proc = _gplace(*command, override, f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert proc.returncode == 2 and f"gplace: error: {message}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r" / "placement.json").exists()


@pytest.mark.parametrize("read", ["${h}", "${..h}", "${oc.select:h,8}"])
def test_a_top_level_key_that_an_interpolation_reads_is_taken(tmp_path, read):
    """`+h=16 encoder.hidden_size='${h}'` (one size shared by several settings, a common Hydra pattern) was refused
    as a key nothing reads, and then a relative interpolation or one by a resolver (found by reviews of the check)."""
    proc = _gplace("logger=none", "trainer.updates=1", "trainer.samples_per_update=2", "+h=16",
                   f"encoder.hidden_size={read}", "policy.hidden_size=16", f"hydra.run.dir={tmp_path / 'r'}",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "r" / "placement.json").exists()


@pytest.mark.parametrize("kwargs, message", [
    (dict(time_limit=-5), "time_limit must be a finite number > 0, got -5"),
    (dict(time_limit=math.nan), "time_limit must be a finite number > 0, got nan"),
    (dict(time_limit="abc"), "time_limit must be a finite number > 0, got 'abc'"),
    (dict(time_limit=True), "time_limit must be a finite number > 0, got True"),
    (dict(max_variables=2.5), "max_variables must be a whole number >= 1, got 2.5"),
    (dict(max_variables=-1), "max_variables must be a whole number >= 1, got -1"),
])
def test_the_pipeline_ilps_limits_are_checked_naming_them(kwargs, message):
    """A negative or NaN time limit (and True) reached HiGHS, which ignored it and placed; a string failed in
    SciPy's option manager with a TypeError; a fractional or negative max_variables was accepted."""
    with pytest.raises(ValueError, match=f"^PipelineILPPlacer: {re.escape(message)}"):
        PipelineILPPlacer(**kwargs)


def _tf_runtime(**kwargs):
    from gplace.runtime import TensorFlowRuntime

    return TensorFlowRuntime(**kwargs)


@pytest.mark.parametrize("make, message", [
    (lambda: MSCT(max_lp_variables=-5), "MSCT: max_lp_variables must be a whole number >= 0, got -5"),
    (lambda: MSCT(max_lp_variables=2.5), "MSCT: max_lp_variables must be a whole number >= 0, got 2.5"),
    (lambda: MSCT(threshold=math.nan), "MSCT: threshold must be a finite number, got nan"),
    (lambda: MSCT(threshold="abc"), "MSCT: threshold must be a finite number, got 'abc'"),
    (lambda: GDPPolicy(2, num_layers=True), "GDPPolicy: num_layers must be a whole number >= 1, got True"),
    (lambda: GDPPolicy(2, num_layers=2.5), "GDPPolicy: num_layers must be a whole number >= 1, got 2.5"),
    (lambda: GDPPolicy(2, num_heads="abc"), "GDPPolicy: num_heads must be a whole number >= 1, got 'abc'"),
    (lambda: GDPPolicy(2, segment_size=math.nan), "GDPPolicy: segment_size must be a whole number >= 1, got nan"),
    (lambda: SuperpositionPolicy(2, segment_size=2.5),
     "SuperpositionPolicy: segment_size must be a whole number >= 1, got 2.5"),
    (lambda: MLPPolicy(2, num_layers=True), "MLPPolicy: num_layers must be a whole number >= 0, got True"),
    (lambda: MLPPolicy(2, num_layers=2.5), "MLPPolicy: num_layers must be a whole number >= 0, got 2.5"),
    (lambda: LearnedGrouper(2, hidden_size="abc"), "LearnedGrouper: hidden_size must be a whole number >= 1"),
    (lambda: LearnedGrouper(2, num_type_buckets=2.5), "LearnedGrouper: num_type_buckets must be a whole number"),
    (lambda: ListSchedulingPolicy(revisit="abc"), "ListSchedulingPolicy: revisit must be a finite number, got 'abc'"),
    (lambda: EMABaseline(decay="abc"), "EMABaseline: decay must be a finite number, got 'abc'"),
    (lambda: _tf_runtime(intra_op_threads=2.5), "TensorFlowRuntime: intra_op_threads must be a whole number >= 0"),
    (lambda: _tf_runtime(intra_op_threads=True), "TensorFlowRuntime: intra_op_threads must be a whole number >= 0"),
    (lambda: _tf_runtime(inter_op_threads="abc"), "TensorFlowRuntime: inter_op_threads must be a whole number >= 0"),
])
def test_numeric_settings_of_the_wrong_kind_are_refused_naming_them(make, message):
    """Each was accepted (True layers, a 2.5 segment size, a NaN m-SCT threshold, 2.5 TensorFlow threads) or
    failed with an unrelated TypeError ("'<' not supported between instances of 'str' and 'int'")."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        make()
