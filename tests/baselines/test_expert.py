"""Expert placers: rules on op names, gradient and neighbour following, Inception branches, family dispatch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gplace.baselines import (
    Expert,
    FamilyExpert,
    InceptionExpert,
    SingleDevice,
    expert_for,
    inception_expert,
    nmt_expert,
    rnnlm_expert,
)
from gplace.baselines.expert import resolve_device, update_owners
from gplace.ir import Cluster, Device, Edge, GraphError, Op, OpGraph
from gplace.testing import cpu_gpu_cluster

CPU, GPU0, GPU1, GPU2, GPU3 = range(5)


def build(spec: list[tuple], name: str = "g") -> OpGraph:
    """A graph from ``(op name, op type, [input names], {Op kwargs})`` rows (kwargs optional)."""
    ops, edges = [], []
    for row in spec:
        op_name, op_type, inputs = row[:3]
        ops.append(Op(op_name, op_type, 1e-3, output_bytes=1000, **(row[3] if len(row) > 3 else {})))
        edges += [Edge(src, op_name) for src in inputs]
    return OpGraph.from_ops(ops, edges, name=name)


def devices_by_name(placer, graph: OpGraph, num_gpus: int) -> dict[str, int]:
    placement = placer.place(graph, cpu_gpu_cluster(num_gpus))
    return dict(zip(graph.op_names, placement.devices.tolist(), strict=True))


def mini_rnnlm(layers: int = 2) -> OpGraph:
    """A two-step-free RNNLM with the zoo's (Keras) names: forward, gradients, a gradient sum, an update."""
    spec = [("tokens", "Placeholder", []),
            ("embedding/embeddings", "VarHandleOp", [], {"colocation": "emb"}),
            ("rnnlm_1/embedding_1/GatherV2", "GatherV2", ["embedding/embeddings", "tokens"])]
    prev = "rnnlm_1/embedding_1/GatherV2"
    for layer in range(layers):
        spec.append((f"rnnlm_1/lstm{layer}_1/lstm_cell_1/MatMul", "MatMul", [prev]))
        prev = f"rnnlm_1/lstm{layer}_1/lstm_cell_1/MatMul"
    spec += [("rnnlm_1/logits_1/Tensordot/MatMul", "MatMul", [prev]),
             ("sparse_categorical_crossentropy/Sum", "Sum", ["rnnlm_1/logits_1/Tensordot/MatMul"]),
             ("gradient_tape/rnnlm_1/logits_1/Tensordot/MatMul/MatMul_1", "MatMul",
              ["sparse_categorical_crossentropy/Sum"]),
             ("gradient_tape/rnnlm_1/lstm1_1/lstm_cell_1/MatMul/MatMul", "MatMul",
              ["gradient_tape/rnnlm_1/logits_1/Tensordot/MatMul/MatMul_1"]),
             ("AddN_3", "AddN", ["gradient_tape/rnnlm_1/lstm1_1/lstm_cell_1/MatMul/MatMul"]),
             ("adagrad/Const", "Const", []),
             ("adagrad/Mul", "Mul", ["AddN_3", "adagrad/Const"]),
             ("adagrad/AssignSubVariableOp", "AssignSubVariableOp", ["adagrad/Mul", "embedding/embeddings"],
              {"colocation": "emb"})]
    return build(spec, name=f"rnnlm_layers{layers}_hidden8")


# ---------------------------------------------------------------------- device specs
def test_device_specs_resolve_modulo_the_gpus_of_the_cluster():
    """'gpu:k' is the k-th GPU modulo their number ('gpu:-1' the last), 'cpu' the CPU, or a device name."""
    c = cpu_gpu_cluster(2)
    assert [resolve_device(f"gpu:{k}", c) for k in range(4)] == [GPU0, GPU1, GPU0, GPU1]
    assert resolve_device("gpu:-1", c) == GPU1 and resolve_device("gpu", c) == GPU0
    assert resolve_device("cpu", c) == CPU and resolve_device("/GPU:1", c) == GPU1
    with pytest.raises(GraphError, match="'tpu:0' names no device.*kinds"):
        resolve_device("tpu:0", c)


def test_a_spec_that_is_a_device_name_is_that_device():
    """'gpu:0' was read as the first GPU in the cluster's order before the device of that name: on a cluster
    listing 'gpu:1' before 'gpu:0', an expert rule for 'gpu:0' placed its ops on the device named 'gpu:1'."""
    c = Cluster.build([Device("cpu:0", "cpu"), Device("gpu:1", "gpu"), Device("gpu:0", "gpu")], default_bandwidth=1e9)
    assert resolve_device("gpu:0", c) == 2 and resolve_device("gpu:1", c) == 1
    assert resolve_device("gpu:2", c) == 1  # no device of that name: the third GPU modulo two, the first listed


# ---------------------------------------------------------------------- rules
def test_first_matching_rule_wins_and_unmatched_ops_go_to_default():
    """Rules are tried in order with re.search; ops no rule matches go to ``default`` without following."""
    g = build([("a/x", "MatMul", []), ("b/x", "MatMul", ["a/x"]), ("c", "Add", ["b/x"])])
    placer = Expert([("^b/", "gpu:1"), ("/x$", "cpu")], default="gpu:0")
    assert devices_by_name(placer, g, 2) == {"a/x": CPU, "b/x": GPU1, "c": GPU0}


def test_invalid_rule_pattern_is_a_value_error():
    """A bad regular expression fails when the expert is built, naming the rule."""
    with pytest.raises(ValueError, match=r"expert rule '\(' is not a valid regular expression"):
        Expert([("(", "gpu:0")])


@pytest.mark.parametrize("make, message", [
    (lambda: Expert(default=None), "Expert: default must be a device spec such as 'gpu:0', 'gpu' or a device name, "
                                   "got None"),
    (lambda: Expert(default=3), "Expert: default must be a device spec"),
    (lambda: Expert(gradient_prefixes="gradients/"), "Expert: gradient_prefixes must be a list of strings, got "
                                                     "'gradients/'"),
    (lambda: Expert(gradient_prefixes=[1]), r"Expert: gradient_prefixes must be a list of strings, got \[1\]"),
    (lambda: InceptionExpert(concat_types="ConcatV2"), "InceptionExpert: concat_types must be a list of strings"),
])
def test_an_experts_settings_of_the_wrong_kind_are_refused_naming_them(make, message):
    """default=None failed at place() with "'NoneType' object has no attribute 'partition'"; one prefix string was
    read as its letters ('g', 'r', 'a', ...), so every op whose name starts with one of them counted as a gradient
    op and followed its "forward op" by name."""
    with pytest.raises(ValueError, match=message):
        make()


def test_gradient_ops_follow_their_forward_op_by_longest_name_prefix():
    """gradient_tape/a/b/MatMul/MatMul_1 follows a/b/MatMul; with no placed forward op, the rules decide."""
    g = build([("a/b/MatMul", "MatMul", []), ("a/b", "Identity", ["a/b/MatMul"]),
               ("gradient_tape/a/b/MatMul/MatMul_1", "MatMul", ["a/b"]),
               ("gradient_tape/a/b/Shape", "Const", []),
               ("gradient_tape/z/Tile", "Tile", ["gradient_tape/a/b/MatMul/MatMul_1"])])
    placer = Expert([("MatMul$", "gpu:1"), ("^a/b$", "cpu"), ("Tile", "gpu:2")])
    got = devices_by_name(placer, g, 3)
    assert got["gradient_tape/a/b/MatMul/MatMul_1"] == GPU1  # the longest prefix a/b/MatMul, not a/b
    assert got["gradient_tape/a/b/Shape"] == CPU  # forward op a/b
    assert got["gradient_tape/z/Tile"] == GPU2  # no forward op z: the rules


def test_gradient_ops_follow_the_forward_op_their_grad_of_names():
    """A Keras ReluGrad is named after the activation layer's scope, not the Relu op: grad_of finds it."""
    g = build([("model/act/Relu", "Relu", [], {"phase": "forward"}),
               ("gradient_tape/model/act_1/ReluGrad", "ReluGrad", ["model/act/Relu"],
                {"phase": "backward", "grad_of": "model/act/Relu"})])
    got = devices_by_name(Expert([("Relu$", "gpu:1")]), g, 2)
    assert got["gradient_tape/model/act_1/ReluGrad"] == GPU1


def two_layer_training_step() -> OpGraph:
    """Two layers (``l0`` light, ``l1`` heavy), their gradients gathered by one ``IdentityN``, and a momentum
    optimiser: per variable a slot, its update and the variable's own update; one learning rate for both."""
    spec = [("x", "Placeholder", [], "forward"), ("opt/lr", "VarHandleOp", [], "forward"),
            ("opt/lr_read", "ReadVariableOp", ["opt/lr"], "update")]
    prev = "x"
    for k in range(2):
        spec += [(f"l{k}/w", "VarHandleOp", [], "forward"), (f"l{k}/read", "ReadVariableOp", [f"l{k}/w"], "forward"),
                 (f"l{k}/MatMul", "MatMul", [prev, f"l{k}/read"], "forward")]
        prev = f"l{k}/MatMul"
    spec += [("loss", "Sum", [prev], "forward"),
             ("gradient_tape/l1/MatMul/MatMul", "MatMul", ["loss"], "backward"),
             ("gradient_tape/l0/MatMul/MatMul", "MatMul", ["gradient_tape/l1/MatMul/MatMul"], "backward"),
             ("opt/IdentityN", "IdentityN", ["gradient_tape/l0/MatMul/MatMul", "gradient_tape/l1/MatMul/MatMul"],
              "update")]
    for k in range(2):
        spec += [(f"opt/l{k}_w_momentum", "VarHandleOp", [], "forward"),
                 (f"opt/Mul_{k}", "Mul", ["opt/IdentityN", "opt/lr_read"], "update"),
                 (f"opt/AssignAdd_{k}", "AssignAddVariableOp", [f"opt/l{k}_w_momentum", f"opt/Mul_{k}"], "update"),
                 (f"opt/read_momentum_{k}", "ReadVariableOp", [f"opt/l{k}_w_momentum"], "update"),
                 (f"opt/AssignSub_{k}", "AssignSubVariableOp", [f"l{k}/w", f"opt/read_momentum_{k}"], "update")]
    ops = [Op(name, op_type, 1e-3, output_bytes=1000, phase=phase) for name, op_type, _, phase in spec]
    heavy = {("gradient_tape/l1/MatMul/MatMul", "opt/IdentityN")}
    edges = [Edge(src, name, 10**6 if (src, name) in heavy else None) for name, _, inputs, _ in spec for src in inputs]
    return OpGraph.from_ops(ops, edges, name="two_layers")


@pytest.mark.parametrize("follow_neighbours", [True, False])
def test_optimiser_ops_and_slots_go_with_the_variable_they_update(follow_neighbours: bool):
    """TensorFlow colocates a slot and the ops updating a variable with the variable: layer 0's optimiser ops
    stay on layer 0's GPU although the gradients' IdentityN they read sits with the heavier layer 1."""
    expert = Expert([("^l0/", "gpu:0"), ("^l1/", "gpu:1")], "gpu:1", follow_neighbours=follow_neighbours)
    got = devices_by_name(expert, two_layer_training_step(), 2)
    for k, gpu in enumerate((GPU0, GPU1)):
        updating = [f"opt/l{k}_w_momentum", f"opt/Mul_{k}", f"opt/AssignAdd_{k}", f"opt/read_momentum_{k}",
                    f"opt/AssignSub_{k}"]
        assert {name: got[name] for name in updating} == dict.fromkeys(updating, gpu)
    assert got["opt/IdentityN"] == GPU1


def test_update_owners_leave_ops_shared_by_several_variables_unowned():
    g = two_layer_training_step()
    owner = update_owners(g)
    named = {g.op_names[i]: g.op_names[j] for i, j in enumerate(owner.tolist()) if j >= 0}
    assert named == {f"opt/{op}": f"l{k}/w" for k in range(2) for op in (
        f"l{k}_w_momentum", f"Mul_{k}", f"AssignAdd_{k}", f"read_momentum_{k}", f"AssignSub_{k}")}
    assert (update_owners(build([("w", "VarHandleOp", []), ("a", "AssignVariableOp", ["w"])])) == -1).all()


def test_an_op_shared_by_variables_labelled_in_different_passes_stays_unowned():
    """Layer 0's fused update owned the learning rate in the first pass, before layer 1's written-out update (which
    reaches its variable through its slot) was labelled: the shared rate went to layer 0 for good."""
    g = two_layer_training_step()
    spec = [(op.name, op.type, op.phase) for op in g.ops()]
    edges = [(e.src, e.dst) for e in g.edges() if not e.dst.endswith("_0") and e.src != "opt/l0_w_momentum"]
    ops = [Op(n, t, 1e-3, output_bytes=1000, phase=p) for n, t, p in spec if not n.endswith("_0")]
    ops.append(Op("opt/Apply_0", "ResourceApplyMomentum", 1e-3, output_bytes=0, phase="update"))
    edges += [(src, "opt/Apply_0") for src in ("l0/w", "opt/l0_w_momentum", "opt/lr_read", "opt/IdentityN")]
    g = OpGraph.from_ops(ops, [Edge(a, b) for a, b in edges], name="fused_and_not")
    named = {g.op_names[i]: g.op_names[j] if j >= 0 else None for i, j in enumerate(update_owners(g).tolist())}
    assert named["opt/lr"] is None and named["opt/lr_read"] is None and named["opt/IdentityN"] is None
    assert named["opt/Apply_0"] == named["opt/l0_w_momentum"] == "l0/w"
    assert named["opt/AssignSub_1"] == named["opt/Mul_1"] == named["opt/l1_w_momentum"] == "l1/w"


def test_an_optimiser_op_is_not_moved_to_a_named_neighbour_before_it_follows_its_variable():
    """The forward pass of follow_neighbours moved update ops too: with the learning rate named onto GPU 1, layer
    0's momentum update followed it there while its slot stayed with layer 0 on GPU 0."""
    expert = Expert([("^l0/", "gpu:0"), ("^l1/", "gpu:1"), ("^opt/lr$", "gpu:1")], "gpu:1", follow_neighbours=True)
    got = devices_by_name(expert, two_layer_training_step(), 2)
    assert {got[f"opt/{op}_0"] for op in ("Mul", "AssignAdd", "read_momentum", "AssignSub")} == {GPU0}


def test_following_neighbours_fills_sums_updates_and_constants():
    """With follow_neighbours, an unmatched op goes with its heaviest producer, a source with its consumer."""
    g = build([("w", "Const", []), ("x", "MatMul", ["w"]), ("y", "MatMul", []),
               ("AddN", "AddN", ["x", "y"], {}), ("out", "Identity", ["AddN"])])
    g = OpGraph.from_ops(g.ops(), [Edge("w", "x"), Edge("x", "AddN", 10), Edge("y", "AddN", 99),
                                   Edge("AddN", "out")], name="g")
    got = devices_by_name(Expert([("^x$", "gpu:0"), ("^y$", "gpu:1")], follow_neighbours=True), g, 2)
    assert got == {"w": GPU0, "x": GPU0, "y": GPU1, "AddN": GPU1, "out": GPU1}


def test_pinned_ops_go_to_their_kind_and_groups_follow_their_first_member():
    """An op pinned to the CPU leaves the GPU its rule names; a colocation group goes where its first op goes."""
    g = build([("input", "Iterator", [], {"pinned": "cpu"}), ("var", "VarHandleOp", [], {"colocation": "v"}),
               ("read", "ReadVariableOp", ["var"], {"colocation": "v"}), ("mm", "MatMul", ["input", "read"])])
    got = devices_by_name(Expert([("^var$", "gpu:1"), ("^read$", "gpu:0"), (".", "gpu:0")]), g, 2)
    assert got == {"input": CPU, "var": GPU1, "read": GPU1, "mm": GPU0}


# ---------------------------------------------------------------------- the paper's families
@pytest.mark.parametrize("num_gpus", [2, 4])
def test_rnnlm_expert_puts_each_lstm_layer_on_its_own_gpu(num_gpus: int):
    """Layer l on GPU l mod G with the embedding on layer 0's; logits and loss on the last GPU; gradients,
    their sum and the update follow; the embedding's update stays in the embedding's colocation group."""
    got = devices_by_name(rnnlm_expert(layers=2), mini_rnnlm(2), num_gpus)
    last = GPU0 + num_gpus - 1
    assert got["rnnlm_1/embedding_1/GatherV2"] == got["embedding/embeddings"] == GPU0
    assert got["rnnlm_1/lstm0_1/lstm_cell_1/MatMul"] == GPU0
    assert got["rnnlm_1/lstm1_1/lstm_cell_1/MatMul"] == GPU1
    assert got["rnnlm_1/logits_1/Tensordot/MatMul"] == got["sparse_categorical_crossentropy/Sum"] == last
    assert got["gradient_tape/rnnlm_1/logits_1/Tensordot/MatMul/MatMul_1"] == last
    assert got["gradient_tape/rnnlm_1/lstm1_1/lstm_cell_1/MatMul/MatMul"] == got["AddN_3"] == GPU1
    assert got["adagrad/Mul"] == GPU1 and got["adagrad/AssignSubVariableOp"] == GPU0
    assert got["tokens"] == GPU0


def test_rnnlm_expert_matches_the_builtin_lstm_lm_names():
    """The same rules place gplace.zoo.lstm_lm's names (embed/, lstmN/, softmax/, loss/, grad/...)."""
    g = build([("embedding", "Var", []), ("embed/t0", "Gather", ["embedding"]), ("lstm0/t0/Cell", "Cell", ["embed/t0"]),
               ("lstm1/t0/Cell", "Cell", ["lstm0/t0/Cell"]), ("softmax/t0/MatMul", "MatMul", ["lstm1/t0/Cell"]),
               ("loss/t0", "Loss", ["softmax/t0/MatMul"]), ("grad/lstm1/t0/Cell", "Grad", ["loss/t0"])],
              name="lstm_lm_2x8_t1_b2_train")
    got = devices_by_name(expert_for(g.name), g, 4)
    assert [got[n] for n in g.op_names] == [GPU0, GPU0, GPU0, GPU1, GPU3, GPU3, GPU1]


@pytest.mark.parametrize(("num_gpus", "attention", "softmax"), [(2, GPU0, GPU1), (4, GPU2, GPU3)])
def test_nmt_expert_spreads_layers_then_attention_then_softmax(num_gpus: int, attention: int, softmax: int):
    """Encoder and decoder layer l on GPU l mod G; attention on GPU L mod G, softmax on GPU L+1 mod G."""
    g = build([("source", "Placeholder", []), ("nmt_1/source_embedding_1/GatherV2", "GatherV2", ["source"]),
               ("nmt_1/encoder0_1/lstm_cell_1/MatMul", "MatMul", ["nmt_1/source_embedding_1/GatherV2"]),
               ("nmt_1/encoder1_1/lstm_cell_1/MatMul", "MatMul", ["nmt_1/encoder0_1/lstm_cell_1/MatMul"]),
               ("nmt_1/attention_keys_1/Tensordot", "MatMul", ["nmt_1/encoder1_1/lstm_cell_1/MatMul"]),
               ("nmt_1/decoder0_1/MatMul", "MatMul", ["nmt_1/attention_keys_1/Tensordot"]),
               ("nmt_1/Softmax_3", "Softmax", ["nmt_1/decoder0_1/MatMul"]),
               ("nmt_1/Sum_3", "Sum", ["nmt_1/Softmax_3"]),
               ("nmt_1/decoder1_1/MatMul", "MatMul", ["nmt_1/Sum_3"]),
               ("nmt_1/attention_out_1/Tanh", "Tanh", ["nmt_1/decoder1_1/MatMul"]),
               ("nmt_1/logits_1/Tensordot", "MatMul", ["nmt_1/attention_out_1/Tanh"]),
               ("gradient_tape/nmt_1/Softmax_3/mul", "Mul", ["nmt_1/logits_1/Tensordot"])], name="nmt_layers2")
    got = devices_by_name(expert_for(g.name), g, num_gpus)
    assert got["nmt_1/source_embedding_1/GatherV2"] == got["nmt_1/encoder0_1/lstm_cell_1/MatMul"] == GPU0
    assert got["nmt_1/decoder0_1/MatMul"] == GPU0
    assert got["nmt_1/encoder1_1/lstm_cell_1/MatMul"] == got["nmt_1/decoder1_1/MatMul"] == GPU1
    assert got["nmt_1/attention_keys_1/Tensordot"] == got["nmt_1/Softmax_3"] == got["nmt_1/Sum_3"] == attention
    assert got["gradient_tape/nmt_1/Softmax_3/mul"] == attention
    assert got["nmt_1/attention_out_1/Tanh"] == got["nmt_1/logits_1/Tensordot"] == softmax


def inception_like() -> OpGraph:
    """stem -> block A (3 branches, one with a weight) -> concat A -> block B (2 branches, the second holding an
    inner concat of two sub-branches) -> concat B -> head, plus one gradient op per branch convolution."""
    spec = [("input", "Placeholder", []), ("stem/conv", "Conv2D", ["input"]), ("axis", "Const", [])]
    spec += [("a0/kernel", "VarHandleOp", []), ("a0/conv", "Conv2D", ["stem/conv", "a0/kernel"]),
             ("a1/conv", "Conv2D", ["stem/conv"]), ("a1/conv2", "Conv2D", ["a1/conv"]),
             ("a2/pool", "AvgPool", ["stem/conv"]),
             ("mixedA/concat", "ConcatV2", ["a0/conv", "a1/conv2", "a2/pool", "axis"])]
    spec += [("b0/conv", "Conv2D", ["mixedA/concat"]), ("b1/conv", "Conv2D", ["mixedA/concat"]),
             ("b1/left", "Conv2D", ["b1/conv"]), ("b1/right", "Conv2D", ["b1/conv"]),
             ("b1/concat", "ConcatV2", ["b1/left", "b1/right", "axis"]),
             ("mixedB/concat", "ConcatV2", ["b0/conv", "b1/concat", "axis"]),
             ("head/logits", "MatMul", ["mixedB/concat"])]
    spec += [("gradient_tape/a1/conv2/Conv2DBackpropInput", "Conv2DBackpropInput", ["head/logits"]),
             ("gradient_tape/b1/right/Conv2DBackpropInput", "Conv2DBackpropInput", ["head/logits"])]
    return build(spec, name="inception_v3_batch2")


def test_inception_expert_finds_the_blocks_of_a_torch_export_graph():
    """torch.export names a concat aten.cat.default, which the default concat types lacked: every op on GPU 0."""
    g = inception_like()
    ops = [dataclasses.replace(op, type="aten.cat.default") if op.type == "ConcatV2" else op for op in g.ops()]
    got = devices_by_name(inception_expert(), OpGraph.from_ops(ops, g.edges(), name=g.name), 3)
    assert (got["a0/conv"], got["a1/conv"], got["a2/pool"]) == (GPU0, GPU1, GPU2)


@pytest.mark.parametrize("num_gpus", [2, 3])
def test_inception_expert_puts_each_branch_of_a_block_on_its_own_gpu(num_gpus: int):
    """Branch j of every block on GPU j mod G (weights with their branch); the stem, block concats and
    head on GPU 0; an inner concat and its sub-branches stay with their branch; gradients follow forward."""
    got = devices_by_name(expert_for("inception_v3_batch2"), inception_like(), num_gpus)
    gpu = [GPU0 + j % num_gpus for j in range(3)]
    assert got["a0/conv"] == got["a0/kernel"] == gpu[0]
    assert got["a1/conv"] == got["a1/conv2"] == gpu[1] and got["a2/pool"] == gpu[2]
    assert got["b0/conv"] == gpu[0]
    assert {got[n] for n in ("b1/conv", "b1/left", "b1/right", "b1/concat")} == {gpu[1]}
    assert got["stem/conv"] == got["mixedA/concat"] == got["mixedB/concat"] == got["head/logits"] == GPU0
    assert got["gradient_tape/a1/conv2/Conv2DBackpropInput"] == gpu[1]
    assert got["gradient_tape/b1/right/Conv2DBackpropInput"] == gpu[1]


def test_inception_expert_on_a_graph_without_blocks_is_the_default_gpu():
    """No concat joins parallel branches: every op goes to the default device."""
    g = build([("a", "Conv2D", []), ("b", "Conv2D", ["a"])])
    assert set(devices_by_name(inception_expert(), g, 2).values()) == {GPU0}


# ---------------------------------------------------------------------- dispatch
def test_expert_for_picks_the_family_from_the_graph_name():
    """Zoo and built-in names map to their family (layers read from the name); unknown ones to one GPU."""
    assert isinstance(expert_for("inception_v3_batch32"), InceptionExpert)
    assert isinstance(expert_for("inception_v3"), InceptionExpert)
    assert any("lstm3" in p for p, _ in expert_for("rnnlm_layers4_hidden2048").rules)
    assert any("lstm2" in p for p, _ in expert_for("lstm_lm_3x1024_t20_b64_train").rules)
    assert any("decoder7" in p for p, _ in expert_for("gnmt8_layers8_hidden1024").rules)
    assert expert_for("nmt_layers2_hidden1024").rules == nmt_expert(2).rules
    unknown = expert_for("resnet50")
    assert isinstance(unknown, SingleDevice) and unknown.kind == "gpu"


def test_family_expert_places_as_the_expert_for_the_graph():
    """FamilyExpert (the bench's single `expert` entry) gives expert_for(graph.name)'s placement."""
    g = mini_rnnlm(2)
    c = cpu_gpu_cluster(4)
    assert FamilyExpert().name == "expert"
    np.testing.assert_array_equal(FamilyExpert().place(g, c).devices, rnnlm_expert(2).place(g, c).devices)


def test_bench_paper_config_has_the_expert_baseline():
    """conf/bench_paper.yaml's `expert` baseline instantiates to FamilyExpert, next to every bench.yaml baseline."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    conf = Path(__file__).resolve().parents[2] / "gplace" / "conf"
    paper, default = OmegaConf.load(conf / "bench_paper.yaml"), OmegaConf.load(conf / "bench.yaml")
    assert set(default.baselines) < set(paper.baselines)
    assert isinstance(instantiate(paper.baselines.expert), FamilyExpert)
    assert set(paper) == set(default)


@pytest.mark.parametrize("expert", [rnnlm_expert, nmt_expert])
@pytest.mark.parametrize("layers", [0, -3, True, 1.5, "2"])
def test_an_expert_of_no_whole_layer_count_is_refused_naming_it(expert, layers):
    """rnnlm_expert(0) gave no LSTM rules in silence (lstm1/ then fell to GPU 0); 1.5 and "2" raised range's
    TypeError."""
    with pytest.raises(ValueError, match=f"^{expert.__name__}: layers must be a whole number >= 1, got {layers!r}"):
        expert(layers)


def _phased(ops: list[tuple], edges: list[tuple[str, str]], name: str) -> OpGraph:
    """A graph from ``(name, type, phase, {Op kwargs})`` rows and ``(src, dst)`` edges."""
    built = [Op(n, t, 1e-3, output_bytes=100, phase=p, **(kw[0] if kw else {})) for n, t, p, *kw in ops]
    return OpGraph.from_ops(built, [Edge(a, b) for a, b in edges], name=name)


def test_a_moving_average_slot_and_its_arithmetic_are_owned_by_their_variable():
    """Keras's use_ema: variable -> read -> Mul -> AddV2 -> AssignVariableOp(average). Ownership never passed from
    the owned read to the arithmetic it feeds, so the average and its update were unowned (placed by neighbours)."""
    g = _phased([("w", "VarHandleOp", "forward"), ("mm", "MatMul", "forward"),
                 ("opt/w_average", "VarHandleOp", "forward"),
                 ("opt/read_w", "ReadVariableOp", "update"), ("opt/read_average", "ReadVariableOp", "update"),
                 ("opt/Mul", "Mul", "update"), ("opt/Mul_1", "Mul", "update"), ("opt/Add", "AddV2", "update"),
                 ("opt/Assign", "AssignVariableOp", "update")],
                [("w", "mm"), ("w", "opt/read_w"), ("opt/w_average", "opt/read_average"), ("opt/read_w", "opt/Mul"),
                 ("opt/read_average", "opt/Mul_1"), ("opt/Mul", "opt/Add"), ("opt/Mul_1", "opt/Add"),
                 ("opt/Add", "opt/Assign"), ("opt/w_average", "opt/Assign")], "ema")
    owner = update_owners(g)
    assert {g.op_names[i] for i in np.flatnonzero(owner == g.op_index["w"])} == {
        "opt/w_average", "opt/read_w", "opt/read_average", "opt/Mul", "opt/Mul_1", "opt/Add", "opt/Assign"}


def test_followers_go_where_a_pin_or_colocation_group_puts_what_they_follow():
    """Gradient ops and slots followed the expert's plan for their forward op or variable, before pins and groups
    moved it: the variable pinned to the CPU, its accumulator and its lookup's gradient on GPU 1."""
    g = _phased([("emb/w", "VarHandleOp", "forward", {"pinned": "cpu", "colocation": "emb/w"}),
                 ("emb/lookup", "GatherV2", "forward", {"pinned": "cpu"}), ("dense/mm", "MatMul", "forward"),
                 ("gradient_tape/dense/mm/MatMul", "MatMul", "backward", {"grad_of": "dense/mm"}),
                 ("gradient_tape/emb/lookup/grad", "UnsortedSegmentSum", "backward", {"grad_of": "emb/lookup"}),
                 ("opt/emb_w_acc", "VarHandleOp", "forward"), ("opt/acc_update", "AssignAddVariableOp", "update"),
                 ("opt/apply", "AssignSubVariableOp", "update", {"colocation": "emb/w"})],
                [("emb/w", "emb/lookup"), ("emb/lookup", "dense/mm"), ("dense/mm", "gradient_tape/dense/mm/MatMul"),
                 ("gradient_tape/dense/mm/MatMul", "gradient_tape/emb/lookup/grad"),
                 ("opt/emb_w_acc", "opt/acc_update"), ("gradient_tape/emb/lookup/grad", "opt/acc_update"),
                 ("opt/acc_update", "opt/apply"),
                 ("emb/w", "opt/apply")], "pinned_embedding")
    got = devices_by_name(Expert([("^emb/", "gpu:1"), ("^dense/", "gpu:0")]), g, 2)
    assert got["emb/w"] == got["opt/emb_w_acc"] == got["opt/acc_update"] == got["opt/apply"] == CPU
    assert got["gradient_tape/emb/lookup/grad"] == CPU and got["gradient_tape/dense/mm/MatMul"] == GPU0


def test_an_optimiser_concat_is_no_inception_block():
    """The block search read every op but the backward ones: an update-phase concat of two branches' squared
    gradients made a block, and each square went to the other branch's GPU."""
    g = _phased([("x", "Placeholder", "forward"), ("b0/conv", "Conv2D", "forward"), ("b1/conv", "Conv2D", "forward"),
                 ("mix", "ConcatV2", "forward"), ("loss", "Sum", "forward"),
                 ("gradient_tape/mix", "Slice", "backward", {"grad_of": "mix"}),
                 ("gradient_tape/b0/conv", "Conv2DBackpropFilter", "backward", {"grad_of": "b0/conv"}),
                 ("gradient_tape/b1/conv", "Conv2DBackpropFilter", "backward", {"grad_of": "b1/conv"}),
                 ("opt/sq0", "Square", "update"), ("opt/sq1", "Square", "update"),
                 ("opt/concat", "ConcatV2", "update"), ("opt/norm", "Sum", "update")],
                [("x", "b0/conv"), ("x", "b1/conv"), ("b0/conv", "mix"), ("b1/conv", "mix"), ("mix", "loss"),
                 ("loss", "gradient_tape/mix"), ("gradient_tape/mix", "gradient_tape/b0/conv"),
                 ("gradient_tape/mix", "gradient_tape/b1/conv"), ("gradient_tape/b0/conv", "opt/sq0"),
                 ("gradient_tape/b1/conv", "opt/sq1"), ("opt/sq1", "opt/concat"), ("opt/sq0", "opt/concat"),
                 ("opt/concat", "opt/norm")], "inception_with_an_optimiser_concat")
    got = devices_by_name(InceptionExpert(), g, 2)
    assert (got["b0/conv"], got["b1/conv"]) == (GPU0, GPU1)
    assert (got["opt/sq0"], got["opt/sq1"]) == (GPU0, GPU1)


def test_per_variable_updates_feeding_a_shared_group_stay_owned():
    """A TF1-style optimiser: each fused update feeds a NoOp group (a control edge) that increments a step counter
    the bias correction reads. A shared consumer made its producers shared: every update and slot unowned."""
    ops = [("x", "Placeholder", "forward"), ("iter", "VarHandleOp", "forward"),
           ("opt/iter_read", "ReadVariableOp", "update"), ("opt/beta_power", "Pow", "update"),
           ("opt/group", "NoOp", "update"), ("opt/iter_inc", "AssignAddVariableOp", "update")]
    edges = [("iter", "opt/iter_read"), ("opt/iter_read", "opt/beta_power"), ("iter", "opt/iter_inc"),
             ("opt/group", "opt/iter_inc")]
    for k, prev in enumerate(("x", "l0/mm")):
        ops += [(f"l{k}/w", "VarHandleOp", "forward"), (f"l{k}/mm", "MatMul", "forward"),
                (f"grad/l{k}", "MatMul", "backward"), (f"opt/l{k}_m", "VarHandleOp", "forward"),
                (f"opt/apply_{k}", "ResourceApplyAdam", "update")]
        edges += [(f"l{k}/w", f"l{k}/mm"), (prev, f"l{k}/mm"), (f"l{k}/mm", f"grad/l{k}"),
                  (f"l{k}/w", f"opt/apply_{k}"), (f"opt/l{k}_m", f"opt/apply_{k}"),
                  ("opt/beta_power", f"opt/apply_{k}"), (f"grad/l{k}", f"opt/apply_{k}"),
                  (f"opt/apply_{k}", "opt/group")]
    g = _phased(ops, edges, "tf1_adam")
    named = {g.op_names[i]: g.op_names[j] if j >= 0 else None for i, j in enumerate(update_owners(g).tolist())}
    assert [named[f"opt/{op}"] for op in ("apply_0", "l0_m", "apply_1", "l1_m")] == ["l0/w", "l0/w", "l1/w", "l1/w"]
    assert named["opt/group"] is None and named["opt/iter_read"] is None


def test_a_sink_of_two_variables_updates_lends_neither_its_owner():
    """A group fed by v's update and w's moving average took v's owner from its producers and passed it back up:
    w's average was placed with v."""
    g = _phased([("w", "VarHandleOp", "forward"), ("v", "VarHandleOp", "forward"), ("mm", "MatMul", "forward"),
                 ("opt/w_average", "VarHandleOp", "forward"), ("opt/read_w", "ReadVariableOp", "update"),
                 ("opt/read_average", "ReadVariableOp", "update"), ("opt/Mul", "Mul", "update"),
                 ("opt/Mul_1", "Mul", "update"), ("opt/Add", "AddV2", "update"),
                 ("opt/Assign", "AssignVariableOp", "update"), ("opt/v_scaled", "Mul", "update"),
                 ("opt/AssignSub_v", "AssignSubVariableOp", "update"), ("opt/group", "NoOp", "update")],
                [("w", "mm"), ("v", "mm"), ("w", "opt/read_w"), ("opt/w_average", "opt/read_average"),
                 ("opt/read_w", "opt/Mul"), ("opt/read_average", "opt/Mul_1"), ("opt/Mul", "opt/Add"),
                 ("opt/Mul_1", "opt/Add"), ("opt/Add", "opt/Assign"), ("opt/w_average", "opt/Assign"),
                 ("mm", "opt/v_scaled"), ("opt/v_scaled", "opt/AssignSub_v"), ("v", "opt/AssignSub_v"),
                 ("opt/AssignSub_v", "opt/group"), ("opt/Assign", "opt/group")], "two_sinks")
    named = {g.op_names[i]: g.op_names[j] if j >= 0 else None for i, j in enumerate(update_owners(g).tolist())}
    assert {named[f"opt/{op}"] for op in ("w_average", "Mul", "Mul_1", "Add", "Assign", "read_w")} == {"w"}
    assert named["opt/AssignSub_v"] == "v" and named["opt/group"] is None


def test_followers_of_followers_and_of_unnamed_ops_end_with_what_they_follow():
    """One round of following did not reach a gradient whose forward op a slot's colocation group moved; and a
    gradient whose forward op the default placed followed nothing, so a pin on that op left it behind."""
    g = _phased([("opt/s", "VarHandleOp", "forward", {"colocation": "grp"}),
                 ("w", "VarHandleOp", "forward", {"pinned": "cpu"}), ("x", "Placeholder", "forward"),
                 ("f", "MatMul", "forward", {"colocation": "grp"}),
                 ("grad/f", "MatMul", "backward", {"grad_of": "f"}),
                 ("opt/upd", "AssignAddVariableOp", "update")],
                [("w", "f"), ("x", "f"), ("f", "grad/f"), ("opt/s", "opt/upd"), ("grad/f", "opt/upd"),
                 ("w", "opt/upd")], "chained")
    got = devices_by_name(Expert([("^w$", "gpu:1"), ("^f$", "gpu:0")]), g, 2)
    assert got["w"] == got["opt/s"] == got["f"] == got["grad/f"] == CPU
    pinned = _phased([("emb/lookup", "GatherV2", "forward", {"pinned": "cpu"}), ("dense/mm", "MatMul", "forward"),
                      ("gradient_tape/emb/lookup/grad", "UnsortedSegmentSum", "backward", {"grad_of": "emb/lookup"})],
                     [("emb/lookup", "dense/mm"), ("dense/mm", "gradient_tape/emb/lookup/grad")], "default_placed")
    for follow in (False, True):
        got = devices_by_name(Expert([("^dense/", "gpu:1")], follow_neighbours=follow), pinned, 2)
        assert got["gradient_tape/emb/lookup/grad"] == got["emb/lookup"] == CPU
