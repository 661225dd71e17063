"""Expert checks its rules and follow_neighbours on construction, naming the argument and the bad entry (["a0"]
became the rule ('a', '0') and place failed later with "device spec '0' names no device"; a triple or a string
failed with "too many / not enough values to unpack"; follow_neighbours="no" was taken as true)."""

import pytest

from gplace.baselines import Expert
from gplace.testing import chain, uniform_cluster


@pytest.mark.parametrize("rules, entry", [(["a0"], "rules\\[0\\]"), ([("a", "gpu:0", "x")], "rules\\[0\\]"),
                                          ([("a", "gpu:0"), ("b",)], "rules\\[1\\]"), ([("a", 0)], "rules\\[0\\]"),
                                          ([3], "rules\\[0\\]"), ("ab", "rules"), (3, "rules")])
def test_expert_refuses_malformed_rules(rules, entry):
    with pytest.raises(ValueError, match=entry):
        Expert(rules)


@pytest.mark.parametrize("flag", ["no", None, 1])
def test_expert_refuses_non_bool_follow_neighbours(flag):
    with pytest.raises(ValueError, match="follow_neighbours"):
        Expert(follow_neighbours=flag)


def test_expert_accepts_pairs_as_tuples_or_lists():
    expert = Expert([("op0", "gpu:1"), ["op", "gpu:0"]], follow_neighbours=True)
    assert expert.rules == [("op0", "gpu:1"), ("op", "gpu:0")]
    placement = expert.place(chain(), uniform_cluster(2))
    assert placement is not None
