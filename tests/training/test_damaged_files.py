"""Files whose bytes were flipped inside the weights (a bad copy, a failing disk): ``torch.load`` reads them as
other weights (it does not check the zip's CRC-32s), so a damaged checkpoint resumed and a damaged policy file
placed with garbage weights. Both are refused, naming the file and the part."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gplace.pretrained import load_policy, save_policy
from gplace.run_dir import RunDirConflictError
from gplace.training.checkpoint import load_checkpoint


def _flip_inside(path: Path, name: str) -> None:
    """XOR 16 bytes in the middle of the stored bytes of the archive's largest part ending in ``name``."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        info = max((i for i in archive.infolist() if i.filename.endswith(name)), key=lambda i: i.file_size)
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data = bytearray(path.read_bytes())
    middle = start + info.file_size // 2
    data[middle:middle + 16] = bytes(b ^ 0xFF for b in data[middle:middle + 16])
    path.write_bytes(bytes(data))


def test_a_checkpoint_damaged_inside_its_weights_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.pt"
    torch.save({"fingerprint": "fp", "update": 1, "policy": {"w": torch.linspace(0, 1, 4096)}}, path)
    assert load_checkpoint(path, "fp")["update"] == 1
    _flip_inside(path, "")
    with pytest.raises(RunDirConflictError, match=r"checkpoint .*checkpoint.pt cannot be read \(a damaged file: its "
                                                  r"part '.*' fails its checksum\)"):
        load_checkpoint(path, "fp")


def test_a_policy_file_damaged_inside_its_weights_is_refused(tmp_path: Path) -> None:
    from gplace.encoders import GNNEncoder
    from gplace.policies import DeviceAwarePolicy
    from gplace.pretrained import build

    path = tmp_path / "policy.pt"
    encoder = build(GNNEncoder, conv="sage", hidden_size=64, num_layers=2, type_embedding=8, projection=8)
    save_policy(path, encoder, build(DeviceAwarePolicy, hidden_size=64))
    load_policy(path)
    _flip_inside(path, "")
    with pytest.raises(ValueError, match=r"policy.pt is damaged: its part '.*' fails its checksum"):
        load_policy(path)


def test_a_file_saved_without_crc32s_is_read(tmp_path: Path) -> None:
    """torch.serialization.set_crc32_options(False) stores a CRC of 0: nothing to check (it was refused as
    damaged, found by a review)."""
    path = tmp_path / "checkpoint.pt"
    torch.serialization.set_crc32_options(False)
    try:
        torch.save({"fingerprint": "fp", "update": 2, "policy": {"w": torch.linspace(0, 1, 4096)}}, path)
    finally:
        torch.serialization.set_crc32_options(True)
    assert load_checkpoint(path, "fp")["update"] == 2


def test_a_checkpoint_or_policy_file_of_zeros_gets_no_advice_to_load_it_unsafely(tmp_path: Path) -> None:
    """torch takes a file of zeros (a disk that lost it) for its legacy tar format and advises loading it with
    weights_only=False, which the refusal repeated: advice that runs arbitrary code, for a file that is no
    checkpoint."""
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(bytes(12 * 2**10))
    for read in (lambda: load_checkpoint(path, "fp"), lambda: load_policy(path)):
        with pytest.raises(ValueError, match=r"cannot be read .*not the zip archive torch.save writes") as err:
            read()
        assert "weights_only" not in str(err.value)
