"""An optional feature without its extra says which ``pip install 'gplace[...]'`` it needs."""

import sys

import pytest

from gplace.extras import MissingExtraError, require
from gplace.testing import cpu_gpu_cluster, diamond


def test_require_returns_the_module_or_names_the_extra(tmp_path, monkeypatch):
    assert require("json", "none", "a feature") is sys.modules["json"]
    monkeypatch.setitem(sys.modules, "pymetis", None)
    with pytest.raises(MissingExtraError, match=r"^the METIS placer needs pymetis: pip install 'gplace\[metis\]'$") \
            as caught:
        require("pymetis", "metis", "the METIS placer")
    assert isinstance(caught.value, ImportError) and (caught.value.name, caught.value.extra) == ("pymetis", "metis")
    (tmp_path / "broken_extra_pkg.py").write_text("import no_such_module_of_gplace_tests\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"gplace\[x\]' \(importing it failed: No module named 'no_such_module"):
        require("broken_extra_pkg", "x", "a feature")  # installed, but what it imports is not: that is said too


def _metis():
    from gplace.baselines import METIS

    return METIS().place(diamond(), cpu_gpu_cluster())


def _onnx():
    from gplace.importers import from_onnx

    return from_onnx("model.onnx")


def _tensorflow():
    from gplace.tensorflow_setup import import_tensorflow

    return import_tensorflow()


def _ray():
    from gplace.ir import Placement
    from gplace.runtime import Simulator
    from gplace.runtime.ray_runtime import RayRuntime

    graph = diamond()
    return RayRuntime(Simulator()).measure_many(graph, cpu_gpu_cluster(), [Placement.single(graph, 0)])


def _onnx_parts():
    from gplace.export.onnx import run_parts

    return run_parts([], {})


def _onnx_profile():
    from gplace.profiling import onnx_op_times

    return onnx_op_times(diamond())


@pytest.mark.parametrize(("module", "extra", "use"), [
    ("pymetis", "metis", _metis), ("onnx", "onnx", _onnx), ("tensorflow", "tf", _tensorflow), ("ray", "ray", _ray),
    ("onnxruntime", "onnx", _onnx_parts), ("onnxruntime", "onnx", _onnx_profile),
])
def test_a_feature_without_its_package_names_the_extra(monkeypatch, module, extra, use):
    """Each failed with a bare "No module named 'onnx'" (METIS: "pip install pymetis", not the extra; running or
    profiling ONNX parts: "No module named 'onnxruntime'")."""
    monkeypatch.setitem(sys.modules, module, None)  # not installed: importing it raises ImportError
    with pytest.raises(ImportError, match=rf"needs {module}: pip install 'gplace\[{extra}\]'"):
        use()


def test_a_missing_extra_met_during_a_run_is_one_line_not_a_traceback(capsys):
    """The METIS placer or the tf runtime without their extra, met once the job ran, came out as Hydra's
    50-line traceback and exit 1 (at config time it was one line already)."""
    from omegaconf import OmegaConf

    from gplace import cli

    def job():
        require("gplace_no_such_extra_module", "metis", "the METIS placer")

    with pytest.raises(SystemExit) as exit_:
        cli._guard(job, OmegaConf.create({}), "place")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == ("gplace: error: ImportError: the METIS placer needs gplace_no_such_extra_module: "
                   "pip install 'gplace[metis]'\n")


@pytest.mark.parametrize("launcher", ["gplace_slurm", "submitit_local"])
def test_a_submitit_launcher_without_its_plugin_names_the_extra(monkeypatch, capsys, launcher):
    """README's Slurm sweep without gplace[cluster] ended in Hydra's "Could not load 'hydra/launcher/submitit_slurm'"
    with its search path, exit status 1."""
    from gplace import cli

    monkeypatch.setitem(sys.modules, "hydra_plugins.hydra_submitit_launcher", None)
    with pytest.raises(SystemExit) as exit_:
        cli._check_launcher(["-m", f"hydra/launcher={launcher}", "seed=0,1"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (f"gplace: error: ImportError: hydra/launcher={launcher} needs "
                                       "hydra_plugins.hydra_submitit_launcher: pip install 'gplace[cluster]'\n")
    cli._check_launcher(["-m", "hydra/launcher=basic", "seed=0,1"])  # Hydra's own launchers need nothing

