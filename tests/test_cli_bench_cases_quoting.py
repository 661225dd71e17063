"""A bench's ``cases=`` with unquoted overrides is refused with the quoted form (Hydra said only "no viable
alternative at input '[[graph='"; benchmarks/paper_rest/README.md printed that form as its command)."""

from __future__ import annotations

import sys

import pytest

from gplace.cli import _check_cases_quoted, main


@pytest.mark.parametrize("arg", ["cases=[[graph=inception_v3,cluster=paper_4gpu]]",
                                 "+cases=[ [graph=file, graph.path=a/b.txt] ]", "cases=[['graph=x'],[cluster=y]]"])
def test_unquoted_case_overrides_are_refused_with_the_quoted_form(monkeypatch, capsys, arg):
    monkeypatch.setattr(sys, "argv", ["gplace", "bench", arg])
    with pytest.raises(SystemExit) as stop:
        main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "quote each override of a case" in err, err
    assert "cases=[['graph=inception_v3','cluster=paper_4gpu']]" in err


@pytest.mark.parametrize("arg", ["cases=[['graph=inception_v3','cluster=paper_4gpu']]",
                                 'cases=[["graph=file","graph.path=a=b.txt"]]', "search.seconds=5", "out_dir=[x=y]",
                                 """cases=[['graph=x','runtime.note="[a=b]"']]""",
                                 'cases=[["graph=x", "cluster=[y=z]"]]'])
def test_quoted_cases_and_other_overrides_pass(arg):
    _check_cases_quoted([arg])
