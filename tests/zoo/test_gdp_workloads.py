"""GDP's workloads the zoo lacked: GNMT-8 unrolled with fine-grained cells (> 50,000 ops), Transformer-XL with
segment memory, NASNet-A (AmoebaNet's nearest public relative, from Keras)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from test_unrolled import _ancestors

from gplace.baselines import expert_for
from gplace.runtime import Simulator
from gplace.zoo import paper_cluster, transformer_xl, unrolled_gnmt


@pytest.fixture(scope="module")
def gnmt():
    return unrolled_gnmt(layers=4, hidden=16, src_len=5, tgt_len=4, batch=2, vocab=40)


def test_gnmt_at_its_default_sizes_has_more_than_50000_ops() -> None:
    assert unrolled_gnmt().num_ops > 50_000


def test_gnmt_layers_pipeline_across_time_steps(gnmt) -> None:
    assert "encoder1/t4/Mul_h" not in _ancestors(gnmt, "encoder2/t0/Mul_h")  # layer 2, step 0 needs not layer 1, step 4
    assert "decoder0/t3/Mul_h" not in _ancestors(gnmt, "decoder1/t0/Mul_h")
    assert "encoder0_bidi/bw/t4/Mul_h" in _ancestors(gnmt, "encoder1/t0/Mul_h")  # the backward direction
    assert "encoder1/t0/Mul_h" in _ancestors(gnmt, "encoder2/t0/Residual")  # residual from the third layer on
    assert "attention_score/t0/Context" in _ancestors(gnmt, "decoder3/t0/Mul_h")  # the context feeds every layer
    assert any(name.startswith("grad/decoder3/t0/") for name in gnmt.op_names)


def test_gnmt_expert_places_a_layer_per_gpu(gnmt) -> None:
    cluster = paper_cluster(4)
    placement = expert_for(gnmt.name).place(gnmt, cluster)
    device = {name: cluster.device_names[d] for name, d in zip(gnmt.op_names, placement.devices.tolist(),
                                                                 strict=True)}
    assert device["encoder0_bidi/fw/t1/MatMul"] == device["encoder0_bidi/bw/t1/MatMul"] == "/GPU:0"
    assert device["encoder3/t2/MatMul"] == device["decoder3/t2/MatMul"] == "/GPU:3"
    assert Simulator().measure(gnmt, cluster, placement).ok


def test_gnmt_needs_two_layers() -> None:
    with pytest.raises(ValueError, match="at least 2 layers"):
        unrolled_gnmt(layers=1)


def test_transformer_xl_memory_feeds_attention_gets_no_gradient_and_is_written_out() -> None:
    g = transformer_xl(layers=2, d_model=8, heads=2, ff=16, seg_len=4, mem_len=3, batch=2, vocab=20)
    assert "layer1/memory" in _ancestors(g, "layer1/attention/head1/context")
    assert not any(name.startswith("grad/layer0/memory") for name in g.op_names)  # stop_gradient
    assert any(name.startswith("grad/layer0/attention/head1/") for name in g.op_names)
    assert _ancestors(g, "layer1/new_memory") == _ancestors(g, "layer0/ff/layer_norm") | {"layer0/ff/layer_norm"}
    with pytest.raises(ValueError, match="must divide d_model"):
        transformer_xl(d_model=10, heads=3)


@pytest.mark.parametrize("name", ["gnmt", "transformer_xl", "nasnet"])
def test_each_workload_has_a_graph_config(name) -> None:
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"graph={name}"])
    assert cfg.graph._target_.startswith("gplace.zoo")


def test_a_transformer_xl_head_reads_its_slice_of_the_projections():
    """Each head's score and context ops read (and receive) 1/heads of q, k, v and r, as after a split; their
    gradients pass the slice back."""
    graph = transformer_xl(layers=1, d_model=8, heads=2, ff=16, seg_len=3, mem_len=3, batch=2, vocab=20)
    src, dst = graph.edge_index
    edges = {(graph.op_names[s], graph.op_names[d]): int(b)
             for s, d, b in zip(src.tolist(), dst.tolist(), graph.edge_bytes.tolist(), strict=True)}
    head, q, v = "layer0/attention/head1", "layer0/attention/q", "layer0/attention/v"
    whole = int(graph.output_bytes[graph.op_index[q]])
    assert edges[q, f"{head}/content_score"] == edges[q, f"{head}/position_score"] == whole // 2
    assert edges[v, f"{head}/context"] == int(graph.output_bytes[graph.op_index[v]]) // 2
    assert edges[f"grad/{head}/content_score", f"grad/{q}"] == whole // 2
    assert edges[q, f"grad/{head}/content_score"] == whole // 2  # its gradient op reads the slice too
