"""The profile loaders' number pattern fails in linear time: a PipeDream ``graph.txt`` with a 20,000-digit time
ending in ``x`` took 60 s to be refused (the pattern backtracked quadratically); the same numbers are read."""

import time

import pytest

from gplace.importers.profiles import _DECIMAL


@pytest.mark.parametrize("text", ["1", "1.", ".5", "1.5e-3", "+2E+4", "-0.0", "nan", "INF", "-Infinity", "007"])
def test_numbers_float_reads_match(text):
    assert _DECIMAL.fullmatch(text)
    float(text)


@pytest.mark.parametrize("text", ["", ".", "1..2", "1e", "e5", "1_000", "١", "0x10", "1.5e3.2", "in f"])
def test_what_is_no_plain_ascii_number_does_not_match(text):
    assert not _DECIMAL.fullmatch(text)


def test_a_long_run_of_digits_that_fails_to_match_is_refused_at_once():
    text = "1" * 20_000 + "x"
    start = time.process_time()
    assert not _DECIMAL.fullmatch(text)
    assert time.process_time() - start < 2.0  # 60 s before; about 2 ms now
