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

    torch.manual_seed(cfg.seed)
    graph = instantiate(cfg.graph)
    cluster = instantiate(cfg.cluster)
    logger = instantiate(cfg.logger)
    logger.log_config(OmegaConf.to_container(cfg, resolve=True))
    report = place(graph, cluster, encoder=instantiate(cfg.encoder), policy=instantiate(cfg.policy),
                   runtime=instantiate(cfg.runtime), trainer=instantiate(cfg.trainer),
                   max_groups=cfg.max_groups, run_dir=run_dir, logger=logger)
    _print_table(report, run_dir)
    return report.measurement.step_time


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
    console.print(f"wrote {Path(run_dir) / 'placement.json'} and {Path(run_dir) / 'trace.json'}")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if math.isfinite(seconds) else "inf"


@hydra.main(version_base="1.3", config_path="pkg://gplace.conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> float:
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        _fail(f"missing value(s): {', '.join(missing)} (set them on the command line, e.g. {missing[0]}=...)")
    try:
        return run(cfg, HydraConfig.get().runtime.output_dir)
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
    """Build the bench cases, baselines and searches from ``cfg`` (conf/bench.yaml) and run them."""
    from hydra import compose

    from gplace.bench import BenchCase, run_suite
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

    records = []
    for case in cfg.cases:
        case = list(case)
        records = run_suite([lambda case=case: build_case(case)], instantiate(cfg.baselines),
                            {name: make_search(case, spec) for name, spec in cfg.learned.items()},
                            cfg.out_dir, plots=cfg.search.plots, previous=records)
    log.info("wrote %s/RESULTS.md and results.json", cfg.out_dir)
    return records


def main() -> None:
    """Console-script entry point: ``gplace [overrides]`` runs the experiment; ``gplace bench [overrides]``
    the bench."""
    if len(sys.argv) > 1 and sys.argv[1] == "bench":
        del sys.argv[1]
        _bench_main()
    else:
        _hydra_main()
