"""Pretrained policy files: round trips, refusals, and zero-shot placement on unseen graphs and clusters."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from gplace.encoders import GNNEncoder
from gplace.ir import Cluster, Device, InvalidPlacementError
from gplace.pipeline import PipelineSimulator
from gplace.placer import PolicyPlacer
from gplace.policies import DeviceAwarePolicy, MLPPolicy
from gplace.pretrained import (
    build,
    load_policy,
    module_spec,
    pick_pretrained,
    place_with_pretrained,
    place_zero_shot,
    save_policy,
)
from gplace.runtime import Simulator
from gplace.testing import random_dag, uniform_cluster

ENCODER = {"conv": "sage", "hidden_size": 16, "num_layers": 2, "type_embedding": 8, "projection": 8}


def _modules(seed: int = 0):
    torch.manual_seed(seed)
    return build(GNNEncoder, **ENCODER), build(DeviceAwarePolicy, hidden_size=16)


def _greedy(encoder, policy, graph, cluster) -> np.ndarray:
    return PolicyPlacer(graph, cluster, encoder, policy).greedy().devices


def test_round_trip_gives_identical_greedy_placements_and_meta(tmp_path):
    """A saved and reloaded policy places every graph exactly as the original, and keeps its meta."""
    encoder, policy = _modules()
    path = save_policy(tmp_path / "policy.pt", encoder, policy, meta={"max_groups": 256, "graphs": ["a", "b"]})
    loaded_encoder, loaded_policy, meta = load_policy(path)
    assert meta == {"max_groups": 256, "graphs": ["a", "b"]}
    assert type(loaded_encoder) is GNNEncoder and loaded_encoder.init_kwargs == ENCODER
    for seed, devices in ((1, 2), (2, 3), (3, 5)):
        graph, cluster = random_dag(15, seed=seed), uniform_cluster(devices)
        before = _greedy(encoder, policy, graph, cluster)
        after = _greedy(loaded_encoder, loaded_policy, graph, cluster)
        np.testing.assert_array_equal(before, after)
    for (key, value), loaded in zip(encoder.state_dict().items(), loaded_encoder.state_dict().values(), strict=True):
        assert torch.equal(value, loaded), key


def test_loading_a_policy_leaves_the_callers_torch_random_state_as_it_was(tmp_path):
    """Rebuilding the networks drew their first weights from torch's global generator (replaced by the file's at
    once), so a caller's seeded draws after gplace.place(method="pretrained") or load_policy changed."""
    path = save_policy(tmp_path / "policy.pt", *_modules())
    torch.manual_seed(0)
    want = torch.rand(3)
    torch.manual_seed(0)
    load_policy(path)
    assert torch.equal(torch.rand(3), want)


def test_a_fixed_size_policy_round_trips_too(tmp_path):
    """Any module class importable by name is rebuilt from its recorded kwargs (here a per-node MLP policy)."""
    torch.manual_seed(0)
    encoder, policy = build(GNNEncoder, **ENCODER), build(MLPPolicy, num_devices=3, hidden_size=16, state_size=16)
    _, loaded, _ = load_policy(save_policy(tmp_path / "p.pt", encoder, policy))
    graph, cluster = random_dag(12, seed=4), uniform_cluster(3)
    np.testing.assert_array_equal(_greedy(encoder, policy, graph, cluster), _greedy(encoder, loaded, graph, cluster))


class PlainEncoder(torch.nn.Module):
    """An encoder that records nothing about how it was built."""


def test_saving_a_module_that_records_no_arguments_is_refused(tmp_path):
    """A module neither Configurable nor built with build() cannot be rebuilt: saving fails and says how to fix it."""
    with pytest.raises(ValueError, match=r"no init_kwargs.*build\(PlainEncoder"):
        save_policy(tmp_path / "p.pt", PlainEncoder(), build(DeviceAwarePolicy, hidden_size=16))
    assert not (tmp_path / "p.pt").exists()


def test_built_in_modules_record_their_arguments_and_save_without_build(tmp_path):
    encoder, policy = GNNEncoder(**ENCODER), DeviceAwarePolicy(hidden_size=16, state_size=ENCODER["hidden_size"])
    loaded_encoder, loaded_policy, _ = load_policy(save_policy(tmp_path / "p.pt", encoder, policy))
    assert loaded_encoder.config() == encoder.config() and loaded_policy.config() == policy.config()


def test_non_plain_kwargs_and_meta_are_refused(tmp_path):
    """Only plain data goes into a policy file (it is loaded with weights_only=True)."""
    encoder, policy = _modules()
    with pytest.raises(ValueError, match=r"meta\['when'\] is a ndarray"):
        save_policy(tmp_path / "p.pt", encoder, policy, meta={"when": np.zeros(2)})
    with pytest.raises(ValueError, match="non-string key"):
        save_policy(tmp_path / "p.pt", encoder, policy, meta={1: "x"})


def test_save_policy_refuses_the_files_load_policy_would_refuse(tmp_path):
    """A swapped pair and a diverged run's NaN weights were written, and load_policy refused the files."""
    encoder, policy = _modules()
    with pytest.raises(ValueError, match="save_policy: the encoder is a DeviceAwarePolicy, not a gplace encoder"):
        save_policy(tmp_path / "swapped.pt", policy, encoder)
    with torch.no_grad():
        next(iter(policy.parameters())).fill_(float("nan"))
    with pytest.raises(ValueError, match=r"save_policy: weight '.+' of the policy DeviceAwarePolicy holds NaN or inf"):
        save_policy(tmp_path / "nan.pt", encoder, policy)
    assert not list(tmp_path.iterdir())


def test_module_spec_names_the_importable_class():
    """The spec is the class's qualified name and its constructor kwargs."""
    encoder, _ = _modules()
    assert module_spec(encoder) == {"class": "gplace.encoders.gnn.GNNEncoder", "kwargs": ENCODER}


@pytest.mark.parametrize(("doc", "match"), [
    ({"format": "gplace.checkpoint", "version": 1}, "not a gplace.policy file .format 'gplace.checkpoint'"),
    ({"format": "gplace.policy", "version": 2}, "version 2; this gplace reads version 1"),
    ([1, 2, 3], "not a gplace.policy file .format None"),
])
def test_other_formats_and_versions_are_refused(tmp_path, doc, match):
    """Loading checks the format and version fields before building anything."""
    torch.save(doc, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=match):
        load_policy(tmp_path / "other.pt")


def test_a_trainer_checkpoint_is_refused(tmp_path):
    """A file that is not plain data (a trainer checkpoint holds numpy arrays) is refused, not unpickled."""
    torch.save({"fingerprint": "x", "best_devices": np.zeros(3)}, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match="is not a gplace.policy file"):
        load_policy(tmp_path / "checkpoint.pt")
    with pytest.raises(FileNotFoundError):
        load_policy(tmp_path / "missing.pt")


def test_a_damaged_policy_file_is_refused_as_not_a_policy_file(tmp_path):
    """Cut files raised torch's IndexError, KeyError, OSError or UnicodeDecodeError from deep inside its loader."""
    encoder, policy = _modules()
    data = save_policy(tmp_path / "policy.pt", encoder, policy).read_bytes()
    damaged = tmp_path / "damaged.pt"
    for cut in range(0, len(data), len(data) // 60):
        for part in (data[:cut], data[cut + 1:]):
            damaged.write_bytes(part)
            with pytest.raises(ValueError, match="is not a gplace.policy file"):
                load_policy(damaged)


def test_a_policy_trained_without_a_group_limit_places_without_one(tmp_path):
    """``gplace train max_groups=null`` records ``max_groups: None``; placing with its file failed on
    ``int(None)``."""
    import gplace

    encoder, policy = _modules()
    path = save_policy(tmp_path / "policy.pt", encoder, policy, meta={"max_groups": None})
    graph, cluster = random_dag(12, seed=4), uniform_cluster(2)
    place_with_pretrained(graph, cluster, path, samples=2).validate(graph, cluster)
    report = gplace.place(graph, cluster, method=path, budget="2 samples")
    assert report.placement.devices.shape == (12,)


def test_weights_that_do_not_fit_the_class_are_refused(tmp_path):
    """A file whose kwargs were edited so the weights no longer fit names the class in the error."""
    encoder, policy = _modules()
    path = save_policy(tmp_path / "p.pt", encoder, policy)
    doc = torch.load(path, weights_only=True)
    doc["policy"]["kwargs"]["hidden_size"] = 8
    torch.save(doc, path)
    with pytest.raises(ValueError, match=r"weights do not fit gplace.policies.device_aware.DeviceAwarePolicy.*"
                                         r"\(a file written by another gplace version, whose networks differ, or an "
                                         r"edited one: train again, or warm-start a new run from its placement.json\)"):
        load_policy(path)


def test_a_policys_temperature_and_dtype_survive_the_round_trip(tmp_path):
    """A temperature set after construction came back 1.0 (another sampling), float64 weights came back float32."""
    encoder, policy = _modules()
    policy.temperature = 0.05
    encoder.double(), policy.double()
    _, loaded, _ = load_policy(save_policy(tmp_path / "p.pt", encoder, policy))
    assert loaded.temperature == 0.05
    assert {p.dtype for p in loaded.parameters()} == {torch.float64}


@pytest.mark.parametrize("encoder", ["lstm", "gat"])
def test_a_float64_policy_places_and_trains(encoder):
    """A float64 policy loaded from its file could not place anything: the placer's features stayed float32
    ('mat1 and mat2 must have the same dtype'), as did the GNN encoder's edge features."""
    from gplace.encoders import LSTMEncoder
    from gplace.training import ReinforceTrainer

    torch.manual_seed(0)
    net = LSTMEncoder(hidden_size=16) if encoder == "lstm" else GNNEncoder("gat", hidden_size=16, heads=2)
    graph, cluster = random_dag(12, seed=1), uniform_cluster(2)
    placer = PolicyPlacer(graph, cluster, net.double(), DeviceAwarePolicy(hidden_size=16, state_size=16).double())
    assert placer.greedy().devices.shape == (12,)
    result = ReinforceTrainer(updates=2, samples_per_update=4, imitation_steps=0).fit(placer, Simulator(), graph,
                                                                                      cluster)
    assert np.isfinite(result.best_step_time)


@pytest.mark.parametrize(("edit", "match"), [
    (lambda doc: doc.update(policy=doc["encoder"], state={"encoder": doc["state"]["encoder"],
                                                          "policy": doc["state"]["encoder"]}),
     "field 'policy' is a GNNEncoder, not a gplace policy"),  # an AttributeError ('greedy') when placing
    (lambda doc: doc.update(meta="notadict"), "field 'meta' must be a mapping, got str"),
    (lambda doc: doc["policy"].update(temperature=0.0),  # NaN log-probabilities, groups on barred devices
     r"field 'gplace.policies.device_aware.DeviceAwarePolicy' temperature must be a finite number > 0, got 0.0"),
])
def test_a_file_whose_fields_are_of_the_wrong_kind_is_named(tmp_path, edit, match):
    encoder, policy = _modules()
    path = save_policy(tmp_path / "p.pt", encoder, policy)
    doc = torch.load(path, weights_only=True)
    edit(doc)
    torch.save(doc, path)
    with pytest.raises(ValueError, match=match):
        load_policy(path)


def test_a_recorded_max_groups_that_is_not_a_whole_number_is_named(tmp_path):
    encoder, policy = _modules()
    path = save_policy(tmp_path / "p.pt", encoder, policy)  # save_policy refuses it: a file written otherwise
    doc = torch.load(path, weights_only=True)
    doc["meta"]["max_groups"] = "abc"
    torch.save(doc, path)
    with pytest.raises(ValueError, match="meta max_groups must be a whole number >= 1 or None, got 'abc'") as err:
        place_with_pretrained(random_dag(8, seed=1), uniform_cluster(2), path)
    assert str(err.value).startswith(str(path))  # a bad max_groups did not say which file


def test_a_class_the_file_names_that_no_longer_imports_names_the_file(tmp_path):
    """A file from another gplace version whose class moved said only "cannot import ..."."""
    encoder, policy = _modules()
    path = save_policy(tmp_path / "p.pt", encoder, policy)
    doc = torch.load(path, weights_only=True)
    doc["policy"]["class"] = "gplace.policies.moved_away.DeviceAwarePolicy"
    torch.save(doc, path)
    with pytest.raises(ValueError, match="cannot import 'gplace.policies.moved_away.DeviceAwarePolicy'") as err:
        load_policy(path)
    assert str(err.value).startswith(f"{path}: ")


def test_a_fixed_size_policy_file_on_a_cluster_of_another_size_names_the_file(tmp_path):
    """place_with_pretrained and gplace.place(method=<file>) said "policy has 3 devices" and not which file."""
    import gplace

    torch.manual_seed(0)
    encoder, policy = build(GNNEncoder, **ENCODER), build(MLPPolicy, num_devices=3, hidden_size=16, state_size=16)
    path = save_policy(tmp_path / "three.pt", encoder, policy)
    graph, cluster = random_dag(8, seed=1), uniform_cluster(2)
    for call in (lambda: place_with_pretrained(graph, cluster, path, samples=2),
                 lambda: gplace.place(graph, cluster, method=str(path), budget="2 samples")):
        with pytest.raises(ValueError, match="MLPPolicy has 3 devices, cluster '.*' has 2") as err:
            call()
        assert str(err.value).startswith(f"{path}: ")


def test_zero_shot_places_an_unseen_graph_on_a_cluster_of_another_size(tmp_path):
    """The device-aware policy places a new graph on 4 devices; sampling never does worse than greedy."""
    encoder, policy = _modules()
    path = save_policy(tmp_path / "p.pt", encoder, policy, meta={"max_groups": 8})
    graph, cluster, sim = random_dag(30, seed=9), uniform_cluster(4), Simulator()
    greedy = place_with_pretrained(graph, cluster, path, samples=0)
    best = place_with_pretrained(graph, cluster, path, samples=8, runtime=sim)
    for placement in (greedy, best):
        placement.validate(graph, cluster)
    assert len(np.unique(PolicyPlacer(graph, cluster, encoder, policy, max_groups=8).grouping.op_group)) <= 8
    assert sim.measure(graph, cluster, best).step_time <= sim.measure(graph, cluster, greedy).step_time
    np.testing.assert_array_equal(
        place_zero_shot(encoder, policy, graph, cluster, max_groups=8).devices, greedy.devices)


def test_zero_shot_rejects_negative_samples_and_a_fixed_size_policy_of_another_size():
    """Errors are raised before any placement is made."""
    torch.manual_seed(0)
    encoder = build(GNNEncoder, **ENCODER)
    policy = build(MLPPolicy, num_devices=3, hidden_size=16, state_size=16)
    graph = random_dag(10, seed=1)
    for samples in (-1, 2.5, "4"):  # 2.5 and "4" failed inside torch and in a comparison
        with pytest.raises(ValueError, match="samples must be a whole number >= 0"):
            place_zero_shot(encoder, policy, graph, uniform_cluster(3), samples=samples)
    with pytest.raises(ValueError, match="MLPPolicy has 3 devices"):
        place_zero_shot(encoder, policy, graph, uniform_cluster(2))


def test_shipped_list_scheduling_policy_places_the_builtin_graph_zero_shot():
    """The GiPH-pretrained policy shipped in gplace/data places the built-in LSTM LM's inference step (never seen)
    on the paper's four K80s, greedy only, at least 2x faster than one GPU (10.4 ms against 28.3 ms). Its training
    step on two K80s was the case until the zoo's costs were corrected (2026-12-02): each weight's gradient sum now
    reads whole-weight parts, and zero-shot the policy splits layers from them (187.9 ms against 95.8 ms)."""
    from pathlib import Path

    import gplace.data
    from gplace.baselines import SingleDevice
    from gplace.zoo import lstm_lm, paper_cluster

    path = Path(gplace.data.__file__).parent / "list_scheduling_giph.pt"
    graph, cluster, sim = lstm_lm(training=False), paper_cluster(num_gpus=4), Simulator()
    placement = place_with_pretrained(graph, cluster, path, samples=0)
    placement.validate(graph, cluster)
    one_gpu = sim.measure(graph, cluster, SingleDevice(kind="gpu").place(graph, cluster)).step_time
    assert one_gpu / sim.measure(graph, cluster, placement).step_time > 2.0


def test_pick_pretrained_takes_the_fastest_greedy_placement_and_the_first_of_equals():
    """Pair k's policy puts every op on device k; devices 0, 1, 2 run at speeds 1, 4 and 2."""
    graph, sim = random_dag(30, seed=3), Simulator()
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", speed) for i, speed in enumerate((1.0, 4.0, 2.0))],
                            default_bandwidth=1e6)

    def on_device(k: int):
        encoder, policy = build(GNNEncoder, **ENCODER), build(MLPPolicy, num_devices=3, hidden_size=16)
        with torch.no_grad():
            policy.net[-1].bias.copy_(torch.tensor([100.0 * (d == k) for d in range(3)]))
        return encoder, policy

    pairs = [on_device(k) for k in range(3)]
    assert [set(place_zero_shot(e, p, graph, cluster).devices) for e, p in pairs] == [{0}, {1}, {2}]
    assert pick_pretrained(pairs, graph, cluster, runtime=sim) == 1
    assert pick_pretrained([pairs[2], pairs[0]], graph, cluster) == 0
    assert pick_pretrained([pairs[0], pairs[1], on_device(1)], graph, cluster) == 1  # equal: the first
    with pytest.raises(ValueError, match="at least one"):
        pick_pretrained([], graph, cluster)


def test_zero_shot_names_the_last_failure_when_no_candidate_runs():
    graph, cluster = random_dag(12, seed=1), uniform_cluster(2, memory=1)
    encoder, policy = _modules()
    with pytest.raises(InvalidPlacementError, match="no placement of .* succeeded; the last failure: .*memory"):
        place_zero_shot(encoder, policy, graph, cluster, samples=2, runtime=Simulator())


def test_pick_pretrained_names_the_pair_that_cannot_place_or_is_no_pair():
    """A fixed-size pair of another size raised without saying which; a lone encoder failed to unpack."""
    encoder, policy = _modules()
    fixed = (encoder, build(MLPPolicy, num_devices=3, hidden_size=16, state_size=16))
    graph, cluster = random_dag(8, seed=1), uniform_cluster(2)
    with pytest.raises(ValueError, match=r"pretrained\[1\]: MLPPolicy has 3 devices"):
        pick_pretrained([(encoder, policy), fixed], graph, cluster)
    with pytest.raises(TypeError, match=r"pretrained\[0\] must be an \(encoder, policy\) pair, got GNNEncoder"):
        pick_pretrained([encoder], graph, cluster)


def test_a_policy_file_with_nan_weights_is_refused(tmp_path):
    """It placed without complaint (greedy placements from NaN scores)."""
    encoder, policy = _modules()
    path = save_policy(tmp_path / "p.pt", encoder, policy)
    doc = torch.load(path, weights_only=True)
    name = next(iter(doc["state"]["policy"]))
    doc["state"]["policy"][name][..., 0] = float("nan")
    torch.save(doc, path)
    with pytest.raises(ValueError, match=f"weight '{name}' of gplace.policies.device_aware.DeviceAwarePolicy holds"):
        load_policy(path)


def _write_module(folder, name: str, body: str) -> None:
    """A module ``name`` in ``folder`` whose import appends a line to ``folder/imported.txt``."""
    (folder / f"{name}.py").write_text(
        "from pathlib import Path\n"
        f"with open(Path(__file__).with_name('imported.txt'), 'a') as f:\n    f.write('{name}\\n')\n" + body)


def _naming(tmp_path, field: str, cls: str, kwargs: dict | None = None):
    """A policy file whose ``field`` names ``cls`` (with ``kwargs``: no weights)."""
    path = save_policy(tmp_path / "p.pt", *_modules())
    doc = torch.load(path, weights_only=True)
    doc[field] = {"class": cls, "kwargs": kwargs or {}}
    doc["state"][field] = {}
    torch.save(doc, path)
    return path


def test_a_policy_file_naming_a_module_not_imported_is_refused_without_importing_it(tmp_path, monkeypatch):
    """load_policy imported whatever module the file named (running its top-level code), then its constructor:
    a crafted policy.pt beside a module of the attacker's in the working directory ran that module."""
    import sys

    _write_module(tmp_path, "gplace_probe_unimported", "import torch\nclass Evil(torch.nn.Module):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = _naming(tmp_path, "encoder", "gplace_probe_unimported.Evil")
    try:
        with pytest.raises(ValueError, match=r"class 'gplace_probe_unimported.Evil' is in module "
                                             r"'gplace_probe_unimported', which is not imported.*import "
                                             r"gplace_probe_unimported before loading the file if you trust it "
                                             r"\(gplace place: 'imports=\[gplace_probe_unimported\]'\)") as err:
            load_policy(path)
    finally:
        sys.modules.pop("gplace_probe_unimported", None)
    assert str(err.value).startswith(f"{path}: ")
    assert not (tmp_path / "imported.txt").exists()


def test_a_module_the_caller_imported_loads_and_is_not_imported_again(tmp_path, monkeypatch):
    """A user's own policy class (README: "or your own modules") loads once the caller has imported its module; a
    class there that is no gplace encoder is refused by the interface check; neither imports the module again."""
    import importlib
    import sys

    _write_module(tmp_path, "gplace_probe_mine", "import torch\nfrom gplace.policies import DeviceAwarePolicy\n"
                  "class MyPolicy(DeviceAwarePolicy):\n    pass\nclass Plain(torch.nn.Module):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        mine = importlib.import_module("gplace_probe_mine")
        torch.manual_seed(0)
        encoder, policy = build(GNNEncoder, **ENCODER), build(mine.MyPolicy, hidden_size=16)
        _, loaded, _ = load_policy(save_policy(tmp_path / "mine.pt", encoder, policy))
        assert type(loaded) is mine.MyPolicy
        for (key, value), got in zip(policy.state_dict().items(), loaded.state_dict().values(), strict=True):
            assert torch.equal(value, got), key
        with pytest.raises(ValueError, match="field 'encoder' is a Plain, not a gplace encoder"):
            load_policy(_naming(tmp_path, "encoder", "gplace_probe_mine.Plain"))
    finally:
        sys.modules.pop("gplace_probe_mine", None)
    assert (tmp_path / "imported.txt").read_text() == "gplace_probe_mine\n"


def test_kwargs_asking_for_more_than_the_file_holds_are_refused_before_anything_is_allocated(tmp_path):
    """A 1 KB file whose kwargs asked for hidden_size 10**7 made gplace allocate terabytes (the allocator's raw
    RuntimeError; near the machine's memory, an OOM kill). The class is built on the meta device first and its
    weights' shapes compared with the file's."""
    import resource

    path = save_policy(tmp_path / "p.pt", *_modules())
    doc = torch.load(path, weights_only=True)
    doc["policy"]["kwargs"]["hidden_size"] = 10**7
    torch.save(doc, path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match=r"the weights do not fit gplace.policies.device_aware.DeviceAwarePolicy"
                                         r".*'hidden_size': 10000000.*'node.0.weight' is \(16, 16\) in the file, "
                                         r"\(10000000, 10000000\) when built"):
        load_policy(path)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 100_000  # KiB: nothing the size of a layer


def test_a_layer_count_above_the_weights_in_the_file_is_refused_before_the_build(tmp_path):
    """num_layers=10**9 in an edited file built a billion layers on the meta device (memory growing, never
    ending) before the shapes were compared."""
    path = save_policy(tmp_path / "p.pt", *_modules())
    doc = torch.load(path, weights_only=True)
    doc["encoder"]["kwargs"]["num_layers"] = 10**9
    torch.save(doc, path)
    with pytest.raises(ValueError, match=r"p.pt: field 'gplace.encoders.gnn.GNNEncoder' num_layers=1000000000 asks "
                                         r"for more layers than the file holds weights \(\d+\)"):
        load_policy(path)


def test_a_constructor_that_raises_a_runtime_error_names_the_file(tmp_path):
    """torch's own classes raise RuntimeError on bad sizes; it escaped load_policy as it was."""
    path = _naming(tmp_path, "policy", "torch.nn.Linear", {"in_features": -1, "out_features": 2})
    with pytest.raises(ValueError, match="field 'torch.nn.Linear' could not be built on the meta device.*"
                                         "negative dimension") as err:
        load_policy(path)
    assert str(err.value).startswith(f"{path}: ")


def test_a_device_given_in_the_kwargs_does_not_allocate_before_the_shapes_are_checked(tmp_path):
    """A device among the kwargs would override the meta device of the check and allocate for real."""
    path = _naming(tmp_path, "policy", "torch.nn.Linear", {"in_features": 10**7, "out_features": 10**7,
                                                           "device": "cpu"})
    with pytest.raises(ValueError, match=r"the weights do not fit torch.nn.Linear.*missing 'weight'"):
        load_policy(path)


@pytest.mark.parametrize(("encoder", "policy"), [*((e, "device_aware") for e in ("lstm", "sage", "gat", "gin")),
                                                 *(("sage", p) for p in ("seq2seq", "mlp", "gdp", "superposition",
                                                                         "list_scheduling"))])
def test_every_built_in_encoder_and_policy_saves_and_loads(tmp_path, encoder, policy):
    """Each is built on the meta device to check the file's shapes, then for real, and keeps its weights."""
    from small_networks import ENCODERS, POLICIES

    torch.manual_seed(0)
    modules = ENCODERS[encoder](), POLICIES[policy]()
    loaded = load_policy(save_policy(tmp_path / "p.pt", *modules))
    for module, got in zip(modules, loaded, strict=False):
        assert type(got) is type(module)
        for (key, value), found in zip(module.state_dict().items(), got.state_dict().values(), strict=True):
            assert torch.equal(value, found), key


@pytest.mark.parametrize("learned_from, warned", [("pipe-v2/1f1b/m4", True), ("sim-v1", False), (None, False),
                                                  ("torch-v1", False)])
def test_a_policy_learned_for_the_other_objective_says_so(tmp_path, caplog, learned_from, warned):
    """A policy file records the runtime it learned from; placing for the other objective (a pipelined mini-batch
    against one step) logs that its placements are measured, but it learned the other one."""
    import gplace

    encoder, policy = _modules()
    meta = {"max_groups": 256} | ({"runtime": learned_from} if learned_from else {})
    path = save_policy(tmp_path / "policy.pt", encoder, policy, meta=meta)
    graph, cluster = random_dag(10, seed=1), uniform_cluster(2)
    with caplog.at_level("WARNING", logger="gplace.pretrained"):
        place_with_pretrained(graph, cluster, path, samples=2)
        gplace.place(graph, cluster, method=path, budget="2 samples")
    assert sum("learned another objective" in r.getMessage() for r in caplog.records) == 2 * warned
    if learned_from == "pipe-v2/1f1b/m4":  # another schedule or M is another objective; another runtime is not
        for runtime, says in ((PipelineSimulator(4, "gpipe"), True), (PipelineSimulator(4, "1f1b"), False)):
            caplog.clear()
            with caplog.at_level("WARNING", logger="gplace.pretrained"):
                place_with_pretrained(graph, cluster, path, samples=1, runtime=runtime)
            assert any("(gpipe/m4)" in r.getMessage() for r in caplog.records) == says


def test_another_m_of_the_steady_state_score_is_another_objective(caplog):
    """``pipe-steady-v1/m8`` against ``m16`` passed unwarned (only three-part ids were read for their M)."""
    from gplace.pipeline.steady import SteadyStateScore
    from gplace.pretrained import check_objective

    with caplog.at_level("WARNING", logger="gplace.pretrained"):
        check_objective({"runtime": "pipe-steady-v1/m8"}, SteadyStateScore(8), "p.pt")
        assert not caplog.records
        check_objective({"runtime": "pipe-steady-v1/m8"}, SteadyStateScore(16), "p.pt")
    assert "(m8)" in caplog.records[0].getMessage() and "(m16)" in caplog.records[0].getMessage()


def test_the_pretrained_policy_is_found_where_gplace_is_imported_from_a_zip(tmp_path):
    """``method=pretrained`` from a wheel on sys.path said "no such policy file: .../gplace-0.1.0-py3-none-any.whl/
    gplace/data/list_scheduling_giph.pt": the path inside the zip is no file; a copy is extracted now."""
    package = Path(__file__).resolve().parents[1] / "gplace"
    archive = tmp_path / "gplace.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in package.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                zipped.write(path, path.relative_to(package.parent))
    code = ("import gplace, sys; from gplace.methods import pretrained_path; p = pretrained_path(); "
            "assert '.zip' in gplace.__file__, gplace.__file__; print(p.is_file(), p.stat().st_size); "
            "from gplace.pretrained import load_policy; load_policy(p)")
    env = {**os.environ, "PYTHONPATH": str(archive), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found, size = proc.stdout.split()
    assert found == "True" and int(size) == (package / "data" / "list_scheduling_giph.pt").stat().st_size
