"""The public API: every exported name resolves, and `import gplace` stays light."""

import subprocess
import sys

import pytest

import gplace


@pytest.mark.parametrize("name", gplace.__all__)
def test_every_exported_name_resolves(name):
    assert getattr(gplace, name) is not None


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        gplace.nope  # noqa: B018


def test_import_gplace_loads_no_heavy_framework():
    code = ("import sys, gplace, gplace.importers; "
            "heavy = [m for m in ('torch', 'tensorflow', 'onnx', 'wandb', 'torch_geometric', 'hydra') "
            "if m in sys.modules]; print(heavy); assert not heavy")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)


@pytest.mark.parametrize("method", ["heft", "metis", "ideal_dp"])
def test_placing_with_a_baseline_loads_no_heavy_framework(method):
    """gplace.place imported torch for any method (3.3 s and about 190 MB in a compiler that never uses it): found
    by a probe of gplace inside a host process."""
    code = ("import os, sys, gplace; from gplace.testing import random_dag, cpu_gpu_cluster; "
            "from gplace.pipeline import PipelineSimulator; "
            f"method = {method!r}; runtime = PipelineSimulator(microbatches=4) if method == 'ideal_dp' else None; "
            "gplace.place(random_dag(20), cpu_gpu_cluster(2), method=method, runtime=runtime); "
            "heavy = [m for m in ('torch', 'tensorflow', 'onnx', 'wandb', 'torch_geometric', 'hydra') "
            "if m in sys.modules]; print(heavy); assert not heavy")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]


def test_errors_are_value_errors():
    for err in (gplace.GraphError, gplace.InvalidPlacementError, gplace.UnsupportedGraphError):
        assert issubclass(err, ValueError)


def test_dir_lists_the_lazily_loaded_names():
    """``dir(gplace)`` (completion, help) left out every lazily loaded name, ``place`` among them."""
    assert set(gplace.__all__) <= set(dir(gplace)) and dir(gplace) == sorted(dir(gplace))


def test_the_annotations_of_place_resolve_without_torch():
    """typing.get_type_hints(gplace.place) raised NameError once torch was imported lazily (validators and doc tools
    resolve hints)."""
    import typing

    assert "encoder" in typing.get_type_hints(gplace.place)
