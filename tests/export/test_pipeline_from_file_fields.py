"""pipeline_from_file refuses a malformed placement.json field with a ValueError naming the file and the field
({"split_spec": 3} raised "TypeError: 'int' object is not iterable", {"split_unaligned": [{}]} "KeyError: 'op'",
{"split_backward_away": "many"} "ValueError: invalid literal for int()")."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from gplace.export.torch import pipeline_from_file
from gplace.ir import InvalidPlacementError

torch.set_num_threads(1)
HEADER = {"format": "gplace.placement", "version": 1}  # a placement.json's (the rest as gplace place writes it)


@pytest.mark.parametrize("doc, field", [
    ({"split_spec": 3}, "split_spec"),
    ({"split_spec": ["0"]}, "split_spec"),
    ({"split_spec": {}, "split_unaligned": [{}]}, r"split_unaligned\[0\]"),
    ({"split_spec": {}, "split_unaligned": [3]}, r"split_unaligned\[0\]"),
    ({"split_spec": {}, "split_unaligned": "x"}, "split_unaligned"),
    ({"split_spec": {}, "split_backward_away": "many"}, "split_backward_away"),
    ({"split_spec": {}, "split_backward_away": -1}, "split_backward_away"),
    ({"split_spec": {}, "split_backward_away": 1.5}, "split_backward_away"),
    ({"split_spec": {}, "stage_devices": 2}, "stage_devices"),
    ([1, 2], "is not a gplace.placement file"),
])
def test_malformed_fields_name_file_and_field(tmp_path, doc, field):
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({**HEADER, **doc} if isinstance(doc, dict) else doc))
    with pytest.raises(ValueError, match=rf"placement\.json.*{field}") as info:
        pipeline_from_file(path, nn.Linear(4, 4), torch.ones(2, 4))
    assert not isinstance(info.value, InvalidPlacementError)


def test_well_formed_files_still_read(tmp_path):
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({**HEADER, "split_spec": {}, "split_unaligned": [{"op": "a", "module": "m"}]}))
    with pytest.raises(InvalidPlacementError, match="op 'a', inside module 'm'"):
        pipeline_from_file(path, nn.Linear(4, 4), torch.ones(2, 4))
    path.write_text(json.dumps({**HEADER, "split_spec": {}, "split_unaligned": [], "split_backward_away": 0,
                                "stage_devices": ["/CPU:0"]}))
    assert pipeline_from_file(path, nn.Linear(4, 4), torch.ones(2, 4)).num_stages == 1
