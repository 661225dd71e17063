"""Comparisons: baselines and learned searches on graphs and clusters, written as tables and plots."""

from gplace.bench.report import results_table, write_results
from gplace.bench.runner import BenchRecord, run_baselines, run_learned
from gplace.bench.suite import BenchCase, run_suite

__all__ = ["BenchCase", "BenchRecord", "results_table", "run_baselines", "run_learned", "run_suite", "write_results"]
