"""sim-v1 sizes its channel arrays by the channels a placement uses, not D x D: on the 4,096 devices a cluster may
have, each step allocated six D x D arrays (about 570 MB, of which its peak memory grew 257 MB); a measurement
took 1 s, so placing a 2-op graph with HEFT, one baseline per device, would have taken about 70 minutes."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import resource
    from gplace.ir import Cluster, Device, Edge, Op, OpGraph, Placement
    from gplace.runtime import Simulator

    def cluster(nd):
        return Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, 10**9) for i in range(nd)], default_bandwidth=1e9,
                             default_latency=1e-5, name=f"c{nd}")

    g = OpGraph.from_ops([Op("a", "X", 1e-3, output_bytes=100), Op("b", "X", 1e-3)], [Edge("a", "b")], name="g")
    sim = Simulator()
    assert sim.measure(g, cluster(2), Placement.for_graph(g, [0, 1])).ok  # compiled
    big = cluster(4096)
    prepared = sim._prepared(g, big)  # the cluster's latency and bandwidth copied for the kernel (268 MB)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for last in (1, 4095):
        assert sim.measure(g, big, Placement.for_graph(g, [0, last])).ok
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
""")


def test_a_step_on_4096_devices_allocates_no_device_by_device_arrays():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) < 100  # MB of peak memory the two steps added (257 before, 0 after)
