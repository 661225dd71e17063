"""The paper's RNNLM and NMT as per-time-step unrolled graphs: dependency structure, backward pass, the
paper's experts on them, and their Hydra configs."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.utils import instantiate

from gplace.baselines import SingleDevice, expert_for
from gplace.ir import OpGraph
from gplace.runtime import Simulator
from gplace.zoo import lstm_lm, paper_cluster, unrolled_nmt


def _ancestors(graph: OpGraph, name: str) -> set[str]:
    """Names of every op ``name`` depends on."""
    src, dst = graph.edge_index
    parents: dict[int, list[int]] = {}
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        parents.setdefault(d, []).append(s)
    todo, seen = [graph.op_index[name]], set()
    while todo:
        for p in parents.get(todo.pop(), []):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return {graph.op_names[i] for i in seen}


@pytest.fixture(scope="module")
def rnnlm() -> OpGraph:
    return lstm_lm(layers=2, hidden=32, steps=6, batch=4, vocab=50, optimizer="adagrad")


@pytest.fixture(scope="module")
def nmt() -> OpGraph:
    return unrolled_nmt(layers=2, hidden=16, src_len=5, tgt_len=4, batch=2, vocab=40)


def test_rnnlm_layer_reads_the_layer_below_at_its_step_and_itself_before(rnnlm) -> None:
    up = _ancestors(rnnlm, "lstm1/t0/Cell")
    assert "lstm0/t0/Cell" in up and "lstm0/t5/Cell" not in up and "lstm0/t1/Cell" not in up
    assert "lstm1/t2/Cell" in _ancestors(rnnlm, "lstm1/t3/Cell")
    assert sum(name.startswith("loss/t") for name in rnnlm.op_names) == 6 + 1  # a loss per step, and their sum
    assert "update/lstm0/kernel" in rnnlm.op_names and "ApplyAdagrad" in rnnlm.op_types


def test_nmt_is_unrolled_per_step_with_attention_over_every_source_step(nmt) -> None:
    assert "encoder0/t4/Cell" not in _ancestors(nmt, "encoder1/t0/Cell")
    assert "decoder0/t3/Cell" not in _ancestors(nmt, "decoder1/t0/Cell")
    context = _ancestors(nmt, "attention_score/t0/Context")
    assert all(f"encoder1/t{s}/Cell" in context for s in range(5))
    assert "attention_out/t0" in _ancestors(nmt, "decoder0/t1/Cell")  # input feeding
    assert sum(name.startswith("sparse_categorical_crossentropy/t") for name in nmt.op_names) == 4


def test_nmt_backward_updates_every_variable_next_to_it(nmt) -> None:
    ops = {op.name: op for op in nmt.ops()}
    variables = [op.name for op in ops.values() if op.type == "VariableV2"]
    assert len(variables) == 11
    for var in variables:
        assert ops[f"update/{var}"].colocation == var == ops[var].colocation
    assert "grad/decoder0/t0/MatMul" in _ancestors(nmt, "update/decoder0/kernel")
    assert "loss/total" in _ancestors(nmt, "grad/encoder0/t0/MatMul")


@pytest.mark.parametrize("make", ["rnnlm", "nmt", "gnmt", "transformer_xl", "rnnlm_inference"])
def test_training_steps_carry_their_phases(make, request) -> None:
    """Gradient ops are backward, each naming the op it differentiates, updates ``update``, the rest forward, so
    pipe-v2 runs the update once per mini-batch (every op was phase-less, all modelled as forward); an inference
    graph has no phases."""
    from gplace.zoo import transformer_xl, unrolled_gnmt

    graph = {"gnmt": lambda: unrolled_gnmt(layers=2, hidden=16, src_len=3, tgt_len=3, batch=2, vocab=40),
             "transformer_xl": lambda: transformer_xl(layers=2, d_model=16, heads=2, ff=32, seg_len=4, mem_len=4,
                                                      batch=2, vocab=40),
             "rnnlm_inference": lambda: lstm_lm(layers=2, hidden=32, steps=3, batch=4, vocab=50, training=False),
             }.get(make, lambda: request.getfixturevalue(make))()
    if make == "rnnlm_inference":
        assert not graph.has_phases
        return
    expected = ["backward" if n.startswith("grad/") else "update" if n.startswith("update/") else "forward"
                for n in graph.op_names]
    assert list(graph.phase) == expected and {"forward", "backward", "update"} == set(expected)
    for i, forward in enumerate(graph.grad_of):
        assert (forward >= 0) == (expected[i] == "backward"), graph.op_names[i]
        if forward >= 0:
            assert graph.phase[forward] == "forward"
            name = graph.op_names[i]
            assert name in (f"grad/{graph.op_names[forward]}", f"grad/{graph.op_names[forward]}/AddN"), name


@pytest.mark.parametrize(("make", "rules"), [
    ("rnnlm", {"lstm0/t3/MatMul": 0, "lstm1/t3/Cell": 1, "softmax/t2/MatMul": 3, "grad/lstm1/t1/Cell": 1}),
    ("nmt", {"encoder0/t1/Cell": 0, "decoder1/t2/MatMul": 1, "attention_score/t1/Softmax": 2, "logits/t3": 3,
             "grad/decoder1/t2/MatMul": 1}),
])
def test_the_paper_experts_place_layers_attention_and_softmax_on_their_gpus(make, rules, request) -> None:
    graph, cluster = request.getfixturevalue(make), paper_cluster(num_gpus=4)
    placement = expert_for(graph.name).place(graph, cluster)
    gpus = [i for i, kind in enumerate(cluster.kinds) if kind == "gpu"]
    for name, gpu in rules.items():
        assert placement.devices[graph.op_index[name]] == gpus[gpu], name
    assert Simulator().measure(graph, cluster, placement).ok


@pytest.mark.parametrize("name", ["rnnlm", "nmt"])
def test_graph_configs_build_the_paper_sizes(name) -> None:
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"graph={name}"])
    graph = instantiate(cfg.graph)
    kernel = (4096, 8192) if name == "rnnlm" else (3072, 4096)  # [x, h] x 4 gates; NMT's first decoder layer
    shapes = {tuple(s) for op in graph.ops() for s in op.output_shapes}
    assert kernel in shapes and graph.num_ops > 500
    cluster = paper_cluster(num_gpus=2)
    assert Simulator().measure(graph, cluster, SingleDevice(kind="gpu").place(graph, cluster)).ok


@pytest.mark.parametrize(("build", "size"), [("lstm_lm", "steps"), ("lstm_lm", "layers"), ("unrolled_nmt", "src_len"),
                                             ("unrolled_gnmt", "tgt_len"), ("transformer_xl", "heads"),
                                             ("transformer_xl", "seg_len"), ("transformer_xl", "layers")])
def test_a_size_of_zero_is_refused_by_name(build, size) -> None:
    """layers=0, heads=0, steps=0, src_len=0 or seg_len=0 failed later with a KeyError or ZeroDivisionError, or
    built a graph without the layers asked for."""
    import gplace.zoo

    with pytest.raises(ValueError, match=f"{build}: {size} must be a whole number >= 1, got 0"):
        getattr(gplace.zoo, build)(**{size: 0})
    assert gplace.zoo.transformer_xl(layers=1, d_model=8, heads=2, ff=8, seg_len=2, mem_len=0, batch=1,
                                     vocab=10).num_ops > 0  # no memory is a size of its own


def test_sizes_and_flags_of_builders_and_clusters_are_named():
    """paper_cluster(-1) was a CPU-only cluster named 'haswell+-1xK80'; unrolled_gnmt(layers=2.0), paper_cluster(2.0)
    raised from inside; training='no', dropout='yes' and nvlink='no' were taken as true."""
    from gplace.zoo import lstm_lm, modern_cluster, paper_cluster, unrolled_gnmt

    for make, words in ((lambda: paper_cluster(num_gpus=-1), "paper_cluster: num_gpus must be a whole number >= 1"),
                        (lambda: paper_cluster(2.0), "num_gpus must be a whole number >= 1, got 2.0"),
                        (lambda: paper_cluster(pcie_bandwidth=float("nan")), "pcie_bandwidth must be a finite number"),
                        (lambda: paper_cluster(pcie_bandwidth=None), "pcie_bandwidth must be a finite number"),
                        (lambda: modern_cluster(True), "modern_cluster: num_gpus must be a whole number >= 1"),
                        (lambda: unrolled_gnmt(layers=2.0, src_len=2, tgt_len=2), "layers must be a whole number >= 1"),
                        (lambda: lstm_lm(training="no"), "lstm_lm: training must be true or false, got 'no'"),
                        (lambda: lstm_lm(training=False, optimizer="bogus"), "bogus"),
                        (lambda: unrolled_gnmt(dropout="yes"), "dropout must be true or false"),
                        (lambda: modern_cluster(nvlink="no"), "nvlink must be true or false")):
        with pytest.raises(ValueError, match=words):
            make()


def _in_edge_bytes(graph: OpGraph, name: str) -> dict[str, int]:
    """Bytes on each in-edge of op ``name``, by producer."""
    src, dst = graph.edge_index
    at = graph.op_index[name]
    return {graph.op_names[s]: int(b) for s, d, b in zip(src.tolist(), dst.tolist(), graph.edge_bytes.tolist(),
                                                         strict=True) if d == at}


def _cost(graph: OpGraph, name: str) -> float:
    return float(graph.durations(paper_cluster(1))[graph.op_index[name], 1])


def test_an_embedding_lookup_costs_the_rows_it_reads_not_the_whole_table():
    """A lookup read its whole table: 0.83 ms per NMT step at batch 64 as at batch 16; the rows it gathers now."""
    small, large = (lstm_lm(layers=1, hidden=32, steps=2, batch=4, vocab=vocab) for vocab in (50, 500_000))
    assert _cost(small, "embed/t0") == _cost(large, "embed/t0")
    small, large = (unrolled_nmt(layers=1, hidden=16, src_len=2, tgt_len=2, batch=2, vocab=vocab)
                    for vocab in (40, 500_000))
    for name in ("source_embedding/t0", "grad/source_embedding/t0", "grad/target_embedding/t1"):
        assert _cost(small, name) == _cost(large, name), name


def test_an_attention_key_takes_its_own_slice_of_each_scores_gradient():
    """Each decoder step's score gradient is (batch, src_len, hidden); a key's gradient op read all of it from every
    step (src_len times its slice: 40x on NMT, where they were 15 % of the step); it gets its (batch, hidden)."""
    nmt = unrolled_nmt(layers=1, hidden=16, src_len=5, tgt_len=4, batch=2, vocab=40)
    key_bytes = 4 * 2 * 16
    received = _in_edge_bytes(nmt, "grad/attention_keys/t0")
    assert {received[f"grad/attention_score/t{t}/Tanh"] for t in range(4)} == {key_bytes}
    longer = unrolled_nmt(layers=1, hidden=16, src_len=40, tgt_len=4, batch=2, vocab=40)
    assert _cost(longer, "grad/attention_keys/t0") == _cost(nmt, "grad/attention_keys/t0")


def test_a_weights_gradient_parts_carry_the_whole_weight_and_a_lookups_the_rows_it_read():
    """The sum of a shared weight's per-step gradients read each step's gradient op's output ((batch, 2 hidden):
    128x too small for the paper's RNNLM kernel); each part is a gradient of the whole weight, a lookup's the rows."""
    rnnlm = lstm_lm(layers=1, hidden=32, steps=3, batch=4, vocab=50)
    assert set(_in_edge_bytes(rnnlm, "grad/lstm0/kernel/AddN").values()) == {4 * (2 * 32) * (4 * 32)}
    assert set(_in_edge_bytes(rnnlm, "grad/embedding/AddN").values()) == {4 * 4 * 32}
    nmt = unrolled_nmt(layers=1, hidden=16, src_len=3, tgt_len=2, batch=2, vocab=40)
    kernel = int(nmt.output_bytes[nmt.op_index["encoder0/kernel"]])
    assert set(_in_edge_bytes(nmt, "grad/encoder0/kernel/AddN").values()) == {kernel}
    assert set(_in_edge_bytes(nmt, "grad/source_embedding/AddN").values()) == {4 * 2 * 16}
