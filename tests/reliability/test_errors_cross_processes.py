"""gplace's errors with constructors of their own survive pickling, so a worker process can raise them: a
``NothingFitError`` from a search in a process pool broke the pool (``BrokenProcessPool``; ``multiprocessing.Pool``
hung), as its rebuild called ``__init__`` without ``result``."""

from __future__ import annotations

import pickle

from gplace.configurable import ModuleNotImportedError
from gplace.extras import MissingExtraError
from gplace.methods import make_learner
from gplace.placer import PolicyPlacer
from gplace.runtime import Simulator
from gplace.testing import chain, uniform_cluster
from gplace.training import NothingFitError, ReinforceTrainer


def _round_trip(err: Exception) -> Exception:
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err) and str(again) == str(err) and again.args == err.args
    return again


def test_a_search_where_nothing_fits_raises_an_error_that_crosses_processes():
    graph, cluster = chain((1.0, 2.0, 3.0), nbytes=10**9), uniform_cluster(2, memory=10**6)
    placer = PolicyPlacer(graph, cluster, *make_learner("learned", 2))
    try:
        ReinforceTrainer(updates=1, samples_per_update=2).fit(placer, Simulator(), graph, cluster)
    except NothingFitError as err:
        again = _round_trip(err)
        assert again.result.samples == err.result.samples > 0
    else:
        raise AssertionError("a search where nothing fits returned")


def test_a_missing_extra_keeps_its_module_and_extra():
    again = _round_trip(MissingExtraError("the METIS placer needs pymetis", name="pymetis", extra="metis"))
    assert (again.name, again.extra) == ("pymetis", "metis")


def test_a_module_not_imported_keeps_its_message():
    """Its message came back doubled: module "module 'mypkg.mod' is not imported" is not imported."""
    assert _round_trip(ModuleNotImportedError("mypkg.mod")).module == "mypkg.mod"
