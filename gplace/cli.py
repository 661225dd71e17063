"""The command line: ``gplace`` / ``python -m gplace`` run the configured experiment (Hydra)."""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("gplace")


def run(cfg: DictConfig, run_dir: str | Path) -> float:
    """Build every part from ``cfg``, learn a placement, print the table; returns the learned step time."""
    import torch

    from gplace.experiment import place
    from gplace.pretrained import save_policy

    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    graph = instantiate(cfg.graph)
    cluster = instantiate(cfg.cluster)
    logger = instantiate(cfg.logger)
    logger.log_config(OmegaConf.to_container(cfg, resolve=True))
    encoder = _savable(cfg.encoder)
    policy = _savable(cfg.policy, num_devices=cluster.num_devices)
    runtime = instantiate(cfg.objective)(instantiate(cfg.runtime)) if "objective" in cfg else instantiate(cfg.runtime)
    report = place(graph, cluster, encoder=encoder, policy=policy, runtime=runtime,
                   trainer=instantiate(cfg.trainer), max_groups=cfg.max_groups, run_dir=run_dir, logger=logger,
                   warm_start=_warm_start(cfg, graph, cluster))
    save_policy(Path(run_dir) / "policy.pt", encoder, policy, meta={"max_groups": cfg.max_groups,
                                                                    "graph": graph.name, "cluster": cluster.name})
    _print_table(report, run_dir)
    return report.measurement.step_time


def _warm_start(cfg: DictConfig, graph, cluster):
    """The placement in ``cfg.warm_start`` (a placement.json), or ``None``."""
    from gplace.ir import load_json, placement_from_dict

    path = cfg.get("warm_start")
    return None if path is None else placement_from_dict(load_json(path), graph, cluster)


def _savable(node: DictConfig, **extra):
    """Instantiate a module (a partial config is called with ``extra``); built-in modules record their own
    constructor arguments, so :func:`gplace.pretrained.save_policy` can rebuild them."""
    module = instantiate(node)
    return module(**extra) if not hasattr(module, "parameters") else module


def _print_table(report, run_dir: str | Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{report.graph.name} ({report.graph.num_ops} ops) on {report.cluster.name}")
    table.add_column("placement")
    table.add_column("step time", justify="right")
    table.add_column("vs learned", justify="right")
    learned = report.measurement.step_time
    for name, m in report.baselines.items():
        table.add_row(f"single {name}", _ms(m.step_time) if m.ok else f"failed: {m.reason}",
                      f"{m.step_time / learned:.2f}x" if m.ok else "")
    table.add_row("[bold]learned", f"[bold]{_ms(learned)}", "1.00x")
    console = Console()
    console.print(table)
    console.print(f"speed-up over the best single device: {report.speedup:.2f}x; "
                  f"{report.train.samples} placements sampled in {report.train.seconds:.0f} s")
    console.print(f"wrote {Path(run_dir) / 'placement.json'}, trace.json and policy.pt (for `gplace place`)")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if math.isfinite(seconds) else "inf"


@hydra.main(version_base="1.3", config_path="pkg://gplace.conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> float:
    return _guard(lambda: run(cfg, HydraConfig.get().runtime.output_dir), cfg)


def _guard(job, cfg: DictConfig):
    """Run ``job()``; a user's mistake (missing value, bad file, bad graph) ends in one line, not a traceback."""
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        _fail(f"missing value(s): {', '.join(missing)} (set them on the command line, e.g. {missing[0]}=...)")
    try:
        return job()
    except InstantiationException as err:
        cause = err.__cause__ or err
        if isinstance(cause, ValueError | OSError):
            _fail(f"{type(cause).__name__}: {cause}")
        raise
    except (ValueError, OSError) as err:  # gplace's errors are ValueErrors naming the op, field or file
        _fail(f"{type(err).__name__}: {err}")


def _fail(message: str) -> None:
    """One clear line on stderr and exit status 2, instead of a traceback for a user's mistake."""
    sys.stderr.write(f"gplace: error: {message}\n")
    raise SystemExit(2)


@hydra.main(version_base="1.3", config_path="pkg://gplace.conf", config_name="bench")
def _bench_main(cfg: DictConfig) -> None:
    bench(cfg)


def bench(cfg: DictConfig) -> list:
    """Build the bench cases, baselines and searches from ``cfg`` (gplace/conf/bench.yaml) and run them."""
    if cfg.get("pipeline"):  # gplace/conf/bench_pipeline.yaml
        from gplace.bench.pipeline import bench_pipeline

        return bench_pipeline(cfg)
    from hydra import compose

    from gplace.bench import BenchCase, run_suite
    from gplace.bench.runner import load_records
    from gplace.experiment import place

    search_overrides = ["logger=none", "trainer.progress=false", f"trainer.updates={cfg.search.updates}",
                        f"trainer.max_seconds={cfg.search.seconds}"]

    def build_case(case) -> BenchCase:
        c = compose(config_name="config", overrides=[*case, *search_overrides])
        return BenchCase(instantiate(c.graph), instantiate(c.cluster), instantiate(c.runtime))

    def make_search(case, spec):
        def search(graph, cluster, runtime, run_dir, best_baseline):
            c = compose(config_name="config", overrides=[*case, *search_overrides, *spec.overrides])
            return place(graph, cluster, encoder=instantiate(c.encoder), policy=instantiate(c.policy),
                         runtime=runtime, trainer=instantiate(c.trainer), max_groups=c.max_groups, run_dir=run_dir,
                         warm_start=best_baseline if spec.warm_start else None)
        return search

    records = load_records(Path(cfg.out_dir) / "results.json") if cfg.get("resume", False) else []
    for case in cfg.cases:
        case = list(case)
        records = run_suite([lambda case=case: build_case(case)], instantiate(cfg.baselines),
                            {name: make_search(case, spec) for name, spec in cfg.learned.items()},
                            cfg.out_dir, plots=cfg.search.plots, previous=records)
    log.info("wrote %s/RESULTS.md and results.json", cfg.out_dir)
    return records


@hydra.main(version_base="1.3", config_path="pkg://gplace.conf", config_name="place")
def _place_main(cfg: DictConfig) -> None:
    _guard(lambda: place_with_policy(cfg, HydraConfig.get().runtime.output_dir), cfg)


def place_with_policy(cfg: DictConfig, run_dir: str | Path) -> float:
    """Place ``cfg.graph`` on ``cfg.cluster`` with the policy file ``cfg.checkpoint``; write placement and trace."""
    import time

    from rich.console import Console

    from gplace.experiment import PlacementReport, single_device_baselines, write_report
    from gplace.pretrained import place_with_pretrained
    from gplace.training import TrainResult

    graph, cluster, runtime = instantiate(cfg.graph), instantiate(cfg.cluster), instantiate(cfg.runtime)
    started = time.monotonic()
    placement = place_with_pretrained(graph, cluster, cfg.checkpoint, samples=cfg.samples, runtime=runtime)
    seconds = time.monotonic() - started
    m = runtime.measure(graph, cluster, placement)
    report = PlacementReport(graph, cluster, placement, m, single_device_baselines(graph, cluster, runtime),
                             TrainResult(placement, m, cfg.samples + 1, seconds))
    write_report(report, run_dir)
    Console().print(f"placed {graph.name} ({graph.num_ops} ops) on {cluster.name} in {seconds:.1f} s: "
                    f"{_ms(m.step_time)} ({report.speedup:.2f}x the best single device); wrote {run_dir}")
    return m.step_time


def main() -> None:
    """Console-script entry point: ``gplace [overrides]`` runs the experiment; ``gplace bench [overrides]``
    the bench; ``gplace place checkpoint=policy.pt [overrides]`` places with a trained policy."""
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command in ("bench", "place"):
        del sys.argv[1]
        (_bench_main if command == "bench" else _place_main)()
    else:
        _hydra_main()
