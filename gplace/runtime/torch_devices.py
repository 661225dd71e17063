"""The torch device behind a cluster device name, and whether a run can use it here
(:mod:`gplace.runtime.torch_runtime`, Devices)."""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from gplace.export.parts import check_device_map
from gplace.ir import Cluster
from gplace.ir.errors import error_summary

__all__ = ["NO_DATA", "cluster_problems", "parse_device", "runnable_device_map", "runnable_reason",
           "shared_gpu_problems", "torch_device", "unavailable_reason"]


_EXAMPLE = "{'/GPU:0': 'cuda:0'}"
"""A good ``device_map``, for messages."""
_DEVICE_NAME = re.compile(r"(?:^|/)(?:device:)?(CPU|GPU):([0-9]+)\Z", re.IGNORECASE | re.ASCII)
"""``/CPU:0``, ``/GPU:1``, ``/job:localhost/replica:0/task:0/device:GPU:1``: ASCII digits that end the name
(``/CPU:０``, ``"/CPU:0\\n"`` are none)."""


def torch_device(name: str, device_map: Mapping[str, str] | None = None) -> torch.device:
    """The torch device behind a cluster device name (see :mod:`gplace.runtime.torch_runtime`).

    Raises:
        ValueError: the name maps to no torch device, or ``device_map`` is no mapping of names to torch devices.
    """
    check_device_map(device_map, "torch", _EXAMPLE)
    if device_map is not None and name in device_map:
        return torch.device(parse_device(name, device_map[name]))
    match = _DEVICE_NAME.search(name)
    if match:
        return torch.device("cpu") if match[1].upper() == "CPU" else torch.device("cuda", int(match[2]))
    try:
        return _normalise(torch.device(name))
    except RuntimeError:
        raise ValueError(f"device {name!r} maps to no torch device; give it a device_map entry") from None


def parse_device(name: str, value: str | torch.device) -> str:
    """``device_map[name] = value`` as a torch device string (``"cuda"`` is ``"cuda:0"``).

    Raises:
        ValueError: ``value`` is not a torch device: a str torch cannot read, or neither a str nor a
            ``torch.device`` (``None``; an int, which torch reads as an accelerator's index).
    """
    if isinstance(value, (str, torch.device)):
        try:
            return str(_normalise(torch.device(value)))
        except (RuntimeError, ValueError):  # torch's message named neither the entry nor gplace
            pass
    raise ValueError(f"device_map[{name!r}] = {value!r} is not a torch device (a str such as 'cuda:0', or a "
                     "torch.device)")


NO_DATA = frozenset({"meta"})
"""Torch devices whose tensors hold no data (ops on them compute nothing)."""


def runnable_device_map(device_map: Mapping[str, str] | None) -> dict[str, str]:
    """``device_map`` (cluster device name -> torch device) with each device normalised, for a runtime that
    computes.

    Raises:
        ValueError: ``device_map`` is not a mapping, a value is not a torch device, or one holding no data
            (``meta``: nothing would be computed).
    """
    check_device_map(device_map, "torch", _EXAMPLE)  # a str failed on its .items()
    parsed = {name: parse_device(name, value) for name, value in (device_map or {}).items()}
    for name, value in parsed.items():  # split_program may show a split on meta; a run computes
        if torch.device(value).type in NO_DATA:
            raise ValueError(f"device_map[{name!r}] = {value!r} holds no data: nothing would be computed")
    return parsed


def _normalise(device: torch.device) -> torch.device:
    return torch.device("cuda", 0) if device.type == "cuda" and device.index is None else device


def cluster_problems(cluster: Cluster, device_map: Mapping[str, str] | None = None, *, unshared: str = "") -> list[str]:
    """What keeps ``cluster`` from running here under ``torch-v1``: devices that map to no torch device or to one
    this machine lacks, and GPUs shared by two cluster devices without a ``device_map`` entry for each (with
    ``unshared``, the reason a runtime cannot share a GPU at all: every shared GPU, entries or not)."""
    problems, mapped = [], {}
    missing: dict[str, list[str]] = {}
    for device in cluster.devices:
        try:
            mapped[device.name] = torch_device(device.name, device_map)
        except ValueError as err:
            problems.append(str(err))
            continue
        why = runnable_reason(mapped[device.name])
        if why:
            missing.setdefault(why, []).append(f"{device.name} ({mapped[device.name]})")
    problems += [f"{', '.join(names)} not available ({why})" for why, names in missing.items()]
    return problems + shared_gpu_problems(mapped, device_map, unshared=unshared)


def shared_gpu_problems(mapped: Mapping[str, torch.device], device_map: Mapping[str, str] | None, *,
                        unshared: str = "") -> list[str]:
    """A message per CUDA device that several cluster devices map to, unless ``device_map`` names them all (with
    ``unshared``, the reason sharing cannot work: a message per shared CUDA device, entries or not)."""
    owners: dict[torch.device, list[str]] = {}
    for name, dev in mapped.items():
        if dev.type == "cuda":
            owners.setdefault(dev, []).append(name)
    if unshared:
        return [f"{' and '.join(names)} all map to {dev}: give each its own GPU ({unshared})"
                for dev, names in owners.items() if len(names) > 1]
    explicit = device_map or {}
    return [f"{' and '.join(names)} all map to {dev}: give each its own GPU, or share it on purpose with "
            "device_map entries for each" for dev, names in owners.items()
            if len(names) > 1 and not all(n in explicit for n in names)]


def runnable_reason(device: torch.device) -> str:
    """Why a run cannot compute on ``device`` (one this machine lacks, or one that holds no data), or ``""``."""
    if device.type in NO_DATA:
        return f"a {device.type} device holds no data"
    return unavailable_reason(device)


def unavailable_reason(device: torch.device) -> str:
    """Why ``device`` cannot be used, or ``""``."""
    if device.type == "cpu":
        return ""
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return "" if (device.index or 0) < count else f"torch sees {count} CUDA device(s)"  # "cuda": the current
    try:
        torch.empty(0, device=device)
    except Exception as err:  # each backend raises its own kind
        return error_summary(err)
    return ""
