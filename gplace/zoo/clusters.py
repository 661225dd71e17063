"""Built-in cluster specs."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Literal

from gplace.ir import Cluster, Device, Link
from gplace.ir.cluster import check_device_count
from gplace.ir.errors import check_flags, check_positive, check_sizes
from gplace.runtime.batch import available_threads

GB = 10**9

HASWELL_CORES = 18
"""Cores of the paper's CPU, the ``"cpu"`` reference of :mod:`gplace.zoo.roofline`."""


def paper_cluster(num_gpus: int = 2, gpu_memory: int = 12 * GB, pcie_bandwidth: float = 6e9,
                  latency: float = 2e-5) -> Cluster:
    """The paper's machine: one Haswell CPU and ``num_gpus`` K80s on PCIe.

    Device speeds are 1.0: the built-in graphs carry per-kind costs for these reference devices.

    Raises:
        ValueError: ``num_gpus`` is not a whole number >= 1, or ``pcie_bandwidth`` not a number > 0.
    """
    check_sizes("paper_cluster", 1, num_gpus=num_gpus)
    check_device_count(num_gpus + 1, "paper_cluster")
    check_positive("paper_cluster", pcie_bandwidth=pcie_bandwidth)
    devices = [Device("/CPU:0", "cpu", 1.0, 128 * GB)]
    devices += [Device(f"/GPU:{i}", "gpu", 1.0, gpu_memory) for i in range(num_gpus)]
    return Cluster.build(devices, default_bandwidth=pcie_bandwidth, default_latency=latency,
                         name=f"haswell+{num_gpus}xK80")


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU model, against which its speed relative to the K80 reference is set."""

    fp32_flops: float
    """Peak FP32 FLOP/s (no tensor cores)."""
    bandwidth: float
    """Peak memory bytes/s."""
    nvlink: float
    """NVLink bytes/s per direction, all links to the switch together."""
    pcie: float
    """Host PCIe bytes/s per direction (effective)."""


K80_DIE = GpuSpec(fp32_flops=4.37e12, bandwidth=240e9, nvlink=0.0, pcie=6e9)
"""One GK210 die of a K80: the ``"gpu"`` reference of :mod:`gplace.zoo.roofline` (speed 1.0)."""

GPUS: dict[str, GpuSpec] = {
    "a100": GpuSpec(fp32_flops=19.5e12, bandwidth=2.039e12, nvlink=300e9, pcie=25e9),
    "h100": GpuSpec(fp32_flops=66.9e12, bandwidth=3.35e12, nvlink=450e9, pcie=50e9),
}
"""SXM 80 GB parts: NVLink 3 (12 links) and PCIe 4 for the A100, NVLink 4 (18 links) and PCIe 5 for the H100."""


def gpu_speed(gpu: GpuSpec) -> float:
    """Speed relative to a K80 die: the geometric mean of the FP32 FLOP/s ratio and the bandwidth ratio.

    One factor scales a roofline time whether the op is compute- or memory-bound, so it sits between the two
    ratios: A100 6.2, H100 14.6.
    """
    return math.sqrt(gpu.fp32_flops / K80_DIE.fp32_flops * gpu.bandwidth / K80_DIE.bandwidth)


def modern_cluster(num_gpus: int = 4, gpu: Literal["a100", "h100"] = "a100", nvlink: bool = True,
                   gpu_memory: int = 80 * GB, cpu_speed: float = 3.0, latency: float = 1e-5) -> Cluster:
    """A modern server: one CPU and ``num_gpus`` A100s or H100s, on an NVLink switch or on PCIe only.

    Device speeds are relative to the paper's reference devices (K80 die, 18-core Haswell), so graphs with
    per-kind costs for those run faster here: GPUs by :func:`gpu_speed`, the CPU by ``cpu_speed``. Every
    GPU pair talks over NVLink (an NVSwitch machine) when ``nvlink``, else over PCIe; the CPU reaches each
    GPU over PCIe.

    Args:
        num_gpus: GPUs. (default: ``4``)
        gpu: ``"a100"`` or ``"h100"``. (default: ``"a100"``)
        nvlink: GPUs connected by NVLink. (default: ``True``)
        gpu_memory: bytes per GPU (40 GB A100s exist too). (default: 80 GB)
        cpu_speed: CPU speed relative to the 18-core Haswell (a current two-socket server). (default: ``3.0``)
        latency: seconds per transfer on every link. (default: ``1e-5``)
    """
    if gpu not in GPUS:
        raise ValueError(f"unknown gpu {gpu!r}; choose one of {sorted(GPUS)}")
    check_sizes("modern_cluster", 1, num_gpus=num_gpus)
    check_device_count(num_gpus + 1, "modern_cluster")
    check_flags("modern_cluster", nvlink=nvlink)
    spec = GPUS[gpu]
    devices = [Device("/CPU:0", "cpu", cpu_speed, 512 * GB)]
    devices += [Device(f"/GPU:{i}", "gpu", gpu_speed(spec), gpu_memory) for i in range(num_gpus)]
    links = [Link(a.name, b.name, spec.nvlink, latency)
             for i, a in enumerate(devices[1:]) for b in devices[2 + i:]] if nvlink else []
    return Cluster.build(devices, links, default_bandwidth=spec.pcie, default_latency=latency,
                         name=f"cpu+{num_gpus}x{gpu}" + ("-nvlink" if nvlink else "-pcie"))


def local_cpu_cluster(num_devices: int = 4, bandwidth: float = 10e9, latency: float = 1e-5) -> Cluster:
    """Logical CPU devices of this machine (as TensorFlow's ``set_logical_device_configuration`` makes them).

    They share the cores this process may run on (its CPU affinity: a Slurm or cpuset allocation, ``taskset``) and
    the machine's memory: each gets an equal share, so its speed relative to the 18-core Haswell reference is
    ``cores / (18 * num_devices)`` and its memory ``RAM / num_devices``.
    Transfers are host memory copies.

    Args:
        num_devices: logical devices. (default: ``4``)
        bandwidth: bytes/s of a copy between two of them. (default: ``10e9``)
        latency: seconds per copy. (default: ``1e-5``)
    """
    check_sizes("local_cpu_cluster", 1, num_devices=num_devices)
    check_device_count(num_devices, "local_cpu_cluster")
    cores = available_threads()
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    speed = cores / (HASWELL_CORES * num_devices)
    devices = [Device(f"/CPU:{i}", "cpu", speed, ram // num_devices) for i in range(num_devices)]
    return Cluster.build(devices, default_bandwidth=bandwidth, default_latency=latency,
                         name=f"local-{num_devices}xcpu")
