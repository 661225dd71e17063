"""Built-in cluster specs."""

from __future__ import annotations

from gplace.ir import Cluster, Device

GB = 10**9


def paper_cluster(num_gpus: int = 2, gpu_memory: int = 12 * GB, pcie_bandwidth: float = 6e9,
                  latency: float = 2e-5) -> Cluster:
    """The paper's machine: one Haswell CPU and ``num_gpus`` K80s on PCIe.

    Device speeds are 1.0: the built-in graphs carry per-kind costs for these reference devices.
    """
    devices = [Device("/CPU:0", "cpu", 1.0, 128 * GB)]
    devices += [Device(f"/GPU:{i}", "gpu", 1.0, gpu_memory) for i in range(num_gpus)]
    return Cluster.build(devices, default_bandwidth=pcie_bandwidth, default_latency=latency,
                         name=f"haswell+{num_gpus}xK80")
