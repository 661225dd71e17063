"""Hydra sweeps (``-m``) from the command line: directories shared by jobs or sweeps, reruns, flags that do not
combine with ``-m``, and the Slurm launcher's request."""

import contextlib
import datetime
import os
import subprocess
import sys

import pytest

FAST = ["logger=none", "trainer.updates=2", "trainer.samples_per_update=2", "trainer.progress=false",
        "graph.layers=1", "graph.steps=2", "graph.hidden=64", "graph.vocab=100", "max_groups=8",
        "encoder.hidden_size=16", "policy.hidden_size=16", "policy.attention_size=8"]
CASE = ("cases=[['graph=lstm_lm','graph.layers=1','graph.steps=2','graph.hidden=64','graph.vocab=100',"
        "'cluster=paper_2gpu']]")


def _gplace(*args, cwd):
    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_a_bench_sweep_with_one_out_dir_for_every_job_is_refused(tmp_path):
    """``out_dir=r`` passed the per-job check: job 1 found job 0's case in the results, skipped it and exited 0,
    its search never run."""
    bench = ["bench", "-m", "out_dir=r", "search.seconds=10", "search.plots=false", CASE, "~learned.seq2seq_warm",
             f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    proc = _gplace(*bench, "search.updates=1,2", cwd=tmp_path)
    assert proc.returncode != 0, proc.stderr[-2000:]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("gplace: error:"))
    assert line.startswith("gplace: error: out_dir=r holds job 0 of this sweep [") and "search.updates=1" in line
    assert "not this job 1 [" in line and "search.updates=2" in line and "out_dir set per job" in line
    again = _gplace(*bench, "search.updates=1", cwd=tmp_path)  # job 0 again: its own out_dir, resumed
    assert again.returncode == 0, again.stderr[-2000:]


def test_a_sweep_job_whose_constructor_refuses_a_value_ends_without_chained_tracebacks(tmp_path):
    """JobFailed was raised inside _guard's except blocks: Hydra's report printed 3 chained tracebacks."""
    proc = _gplace("-m", *FAST, "encoder.hidden_size=0", f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert proc.returncode != 0 and "gplace: error: ValueError: encoder: LSTMEncoder: hidden_size" in proc.stderr
    assert "During handling of the above exception" not in proc.stderr, proc.stderr
    assert "The above exception was the direct cause" not in proc.stderr and proc.stderr.count('File "') <= 3


@pytest.mark.slow
def test_a_sweep_reruns_with_its_overrides_in_any_order_and_refuses_changed_ones(tmp_path):
    """The recorded and current overrides were compared as ordered lists (the same sweep retyped was refused), and a
    changed rerun was told to fix hydra.sweep.subdir, which already held ${hydra.job.num}."""
    sweep = f"hydra.sweep.dir={tmp_path / 'sweep'}"
    assert _gplace("-m", *FAST, "seed=0", sweep, cwd=tmp_path).returncode == 0
    retyped = _gplace("-m", "seed=0", *reversed(FAST), sweep, cwd=tmp_path)
    assert retyped.returncode == 0, retyped.stderr[-2000:]
    changed = _gplace("-m", *FAST, "seed=0", "trainer.updates=3", sweep, cwd=tmp_path)
    assert changed.returncode != 0
    assert f"gplace: error: run directory {tmp_path / 'sweep' / '0'} holds job 0 of a sweep with other " \
           "overrides [" in changed.stderr
    assert "run the changed sweep in its own hydra.sweep.dir" in changed.stderr
    assert "hydra.sweep.subdir" not in changed.stderr and "no hydra.sweep.dir was given" not in changed.stderr


@pytest.mark.slow
def test_a_sweep_in_a_default_directory_in_use_says_it_is_named_by_the_second(tmp_path):
    """Two sweeps started in the same second share multirun/<date>/<time>; the refused job's line said nothing of
    it (the single run's hint was left out in a sweep). Here every default directory of the next two minutes is
    held, as a sweep started that second would hold it."""
    from gplace.run_dir import hold_dir

    start = datetime.datetime.now()
    with contextlib.ExitStack() as held:
        for k in range(120):
            t = start + datetime.timedelta(seconds=k)
            held.enter_context(hold_dir(tmp_path / "multirun" / f"{t:%Y-%m-%d}" / f"{t:%H-%M-%S}" / "0"))
        proc = _gplace("-m", *FAST, "seed=0", cwd=tmp_path)
    assert proc.returncode != 0 and "RunDirInUseError" in proc.stderr, proc.stderr[-2000:]
    assert "no hydra.sweep.dir was given" in proc.stderr and "hydra.sweep.dir=..." in proc.stderr


@pytest.mark.parametrize("flag", [["--cfg", "job"], ["--info"]])
def test_cfg_or_info_with_a_sweep_is_one_line(tmp_path, flag):
    """Hydra's own ValueError ("Only one of --run, --multirun, --cfg, --info ...") came out as a traceback."""
    proc = _gplace("-m", "seed=0,1", *flag, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == "gplace: error: --cfg/--info do not combine with -m: drop -m to see one job's config"


def test_the_slurm_launcher_asks_for_a_gpu_only_when_told():
    """Every job asked Slurm for a GPU, though the networks run on the CPU (device=cpu) and the simulator measures."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cpu = compose(config_name="config", overrides=["hydra/launcher=gplace_slurm"], return_hydra_config=True)
        gpu = compose(config_name="config", overrides=["hydra/launcher=gplace_slurm", "device=cuda",
                                                       "hydra.launcher.gpus_per_node=1"], return_hydra_config=True)
    assert cpu.device == "cpu" and cpu.hydra.launcher.gpus_per_node is None
    assert gpu.hydra.launcher.gpus_per_node == 1


def test_every_failed_job_of_a_sweep_is_named_and_reported_without_a_traceback(tmp_path):
    """Two failed jobs wrote the same line, neither naming its job (Hydra's report at the end names the first
    alone), and that report printed a traceback of gplace's frames."""
    proc = _gplace("-m", *FAST, "encoder.hidden_size=0,-1", f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    lines = [x for x in proc.stderr.splitlines() if x.startswith("gplace: error:")]
    assert proc.returncode != 0 and len(lines) == 2, proc.stderr
    for num, size in ((0, "0"), (1, "-1")):
        named = lines[num][lines[num].index(f"(job {num} of the sweep: "):]
        assert f" encoder.hidden_size={size} " in named and named.endswith(")"), lines
    assert "Traceback" not in proc.stderr and 'File "' not in proc.stderr, proc.stderr


def test_a_job_refused_another_jobs_directory_leaves_its_log_alone(tmp_path):
    """Job 1, refused job 0's directory, appended its ERROR to job 0's cli.log: a finished run's log ended failed."""
    proc = _gplace("-m", *FAST, "seed=0,1", "hydra.sweep.subdir=same", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                   cwd=tmp_path)
    assert proc.returncode != 0 and "holds job 0 of the sweep" in proc.stderr, proc.stderr
    log = (tmp_path / "sweep" / "same" / "cli.log").read_text()
    assert "ERROR" not in log and "holds job 0" not in log, log


def test_threads_null_gives_torch_its_own_thread_count_again():
    """threads=null in a sweep's later job kept the thread count the job before it set."""
    import torch

    from gplace import cli

    own = torch.get_num_threads()
    try:
        cli._set_threads(1)
        assert torch.get_num_threads() == 1
        cli._set_threads(None)
        assert torch.get_num_threads() == own
    finally:
        torch.set_num_threads(own)
