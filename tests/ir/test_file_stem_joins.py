"""``file_stem`` keeps names apart that ``-`` joins into one: graph ``a-b`` on cluster ``c`` and graph ``a`` on
cluster ``b-c`` were both ``a-b-c-s``, so a bench running both stopped with a ``RunDirConflictError``."""

from gplace.ir.serialize import file_stem


def test_names_with_a_dash_joined_differently_get_different_stems():
    assert file_stem("a-b", "c", "s") != file_stem("a", "b-c", "s")
    assert file_stem("a-b", "c", "s").startswith("a-b-c-s-")  # still readable, with the hash after it


def test_names_without_a_dash_and_single_names_keep_their_join():
    assert file_stem("two_branches", "2xgpu", "seq2seq") == "two_branches-2xgpu-seq2seq"
    assert file_stem("gpu-0") == "gpu-0"
