"""Write a placement back into the PyTorch program it was imported from (:func:`gplace.from_torch`).

- :func:`split_program`: the ``torch.export`` program as a ``torch.fx.GraphModule`` split into one submodule per
  part (``torch.fx.passes.split_module``; one part per device where the devices' data flow has no cycle, see
  :mod:`gplace.export.parts`). Each submodule is an :class:`OnDevice`: its weights live on its device and its
  inputs are moved there, so ``forward`` runs each part on its device; writes into moved copies land on the
  tensors moved (:class:`Transfers`). Factory ops' ``device=`` arguments follow the placement. Cluster device
  names map to torch devices as in :func:`~gplace.runtime.torch_runtime.torch_device` (``"/CPU:i"`` -> ``cpu``,
  ``"/GPU:i"`` -> ``cuda:i``; ``device_map`` renames others).
- :func:`module_device_map`: an Accelerate-style ``device_map`` (module path -> torch device) for module-level
  placement, each module on the device that runs most of its ops' compute; :func:`dispatch` applies one to a
  module (weights moved, inputs moved by forward pre-hooks), as ``accelerate.dispatch_model`` does.
- :func:`pipeline_split`: where the placement is a pipeline (devices change at module boundaries), a
  ``torch.distributed.pipelining`` ``Pipe`` with a stage starting at each such module (the ``split_spec`` that
  ``placement.json`` records, :func:`gplace.pipeline.stages.split_spec`), and each stage's device;
  :func:`check_pipeline_split` refuses up front a graph or module that no placement can split.
"""

from __future__ import annotations

import copy
import inspect
import logging
import numbers
import operator
import re
import warnings
import weakref
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import nn
from torch.utils import _pytree as pytree

from gplace.export.parts import check_types, device_parts, framework_devices, part_of
from gplace.importers.torch_export import TorchSource, attribute_of, example_args
from gplace.ir import Cluster, InvalidPlacementError, OpGraph, Placement, UnsupportedGraphError
from gplace.ir.errors import check_flags, check_sizes
from gplace.ir.graph import short_repr
from gplace.runtime.torch_runtime import LAYOUT_FREE, to_device, torch_device, unavailable_reason
from gplace.torch_modes import tracing

if TYPE_CHECKING:
    from torch.distributed.pipelining import Pipe
else:  # typing.get_type_hints resolves the annotations without importing it
    Pipe = Any

logger = logging.getLogger(__name__)


class OnDevice(nn.Module):
    """A submodule that runs on ``device``: tensor inputs are moved there first, and what it writes in place into
    a moved input (a buffer's update, a mutated input) is copied back into the caller's tensor.

    Called by a split program (with its call's :class:`Transfers`), a moved copy outlives the part while it or a
    view of it does (a part may return a view of it): a later part on this device given the same tensor gets the
    same copy, and after every part each live copy written since (through any view) is copied back into its
    tensor, and each live copy whose tensor was written since is refreshed from it. Called alone, it keeps nothing.
    """

    def __init__(self, module: nn.Module, device: torch.device | str) -> None:
        super().__init__()
        self.device = torch.device(device)
        self.module = module.to(self.device)

    def forward(self, *args: Any, transfers: Transfers | None = None, **kwargs: Any) -> Any:
        transfers = Transfers() if transfers is None else transfers
        held: list[torch.Tensor] = []  # the copies this part was given, alive until written back
        moved = pytree.tree_map_only(torch.Tensor, lambda t: transfers.move(t, self.device, held), (args, kwargs))
        out = self.module(*moved[0], **moved[1])
        del moved
        transfers.settle(held)
        return out


class _Copy:
    """A tensor moved to another device: the tensor, its copy there (weakly: the copy lives while a view of it
    does), and each one's version when they last held the same values."""

    __slots__ = ("given", "copy", "given_version", "copy_version")

    def __init__(self, given: torch.Tensor, there: torch.Tensor) -> None:
        self.given, self.copy = given, weakref.ref(there)
        self.given_version, self.copy_version = _version(given), there._version


def _version(t: torch.Tensor) -> int:
    """``t._version``; 0 for an inference tensor (no counter, and no write outside ``torch.inference_mode``)."""
    return 0 if t.is_inference() else t._version


class Transfers:
    """The tensors that the parts of one call of a split program moved to other devices, and their copies there
    (see :class:`OnDevice`). A node of the split graph makes a fresh one each call, so nothing outlives a call."""

    def __init__(self) -> None:
        self.copies: dict[tuple[int, torch.device], _Copy] = {}  # (id(tensor), device) -> its copy there

    def move(self, given: torch.Tensor, device: torch.device, held: list[torch.Tensor]) -> torch.Tensor:
        """``given`` on ``device``: its live copy there, else ``given.to(device)``; a copy is recorded and
        appended to ``held``."""
        key = (id(given), device)
        known = self.copies.get(key)
        there = None if known is None else known.copy()
        if there is None:
            there = given.to(device)
            if there is given:
                return there
            self.copies[key] = _Copy(given, there)
        held.append(there)
        return there

    def settle(self, held: list[torch.Tensor]) -> None:
        """After a part: copy each live copy written since (through any view) back into its tensor, newest first
        (a copy of a copy before that copy); then, with ``held`` emptied, forget the dead copies and refresh, oldest
        first, each live one whose tensor was written since."""
        with torch.no_grad():
            for known in reversed(self.copies.values()):
                there = known.copy()
                if there is not None and there._version != known.copy_version:  # lands on the tensor given
                    known.given.copy_(there)
                    known.given_version, known.copy_version = _version(known.given), there._version
            held.clear()
            there = None
            for key, known in list(self.copies.items()):
                there = known.copy()
                if there is None:
                    del self.copies[key]
                elif _version(known.given) != known.given_version:
                    there.copy_(known.given)
                    known.given_version, known.copy_version = _version(known.given), there._version


def split_program(graph: OpGraph, cluster: Cluster, placement: Placement, *,
                  device_map: Mapping[str, str] | None = None) -> torch.fx.GraphModule:
    """The program of ``graph`` split into per-device submodules ``submod_<k>`` (each an :class:`OnDevice`; ``k``
    counts on past any ``submod_<j>`` the program's module has: a ``torch.no_grad`` or ``torch.autocast`` block's
    body, a child of the model's own). Its own submodules ``_input_check`` (checks the inputs) and ``_transfers``
    (each call's :class:`Transfers`) take a ``_1``, ``_2``, ... suffix where the model's root has an attribute of
    that name (a parameter, buffer or child, which the split program holds too).

    Call it like the exported module (``ExportedProgram.module()``); outputs land on the device of the part
    that made them. As ``ExportedProgram.module()`` does, it shares the program's weights and buffers where they
    stay on their device: a buffer it updates in place is updated in ``graph.source.program`` too (in a functional
    program, ``run_decompositions()``'s, the last part writes the new values of buffers and inputs back). Each call
    first checks its inputs against the program's input specs (their number and nesting, tensor or not, dtype,
    rank, static sizes, the ranges and equalities of ``torch.export.Dim`` sizes, constant non-tensor inputs): a
    mismatch raises ``ValueError`` (``TypeError`` for a wrong number of inputs) naming the input, expected and
    got, before any part runs.

    A placement that keeps the graph's colocation groups whole gives the module's outputs and state updates even
    where a move between devices is a copy (GPUs): the parts run in an order that puts each write in place after
    the earlier reads of its tensor and before the later ones, and a write into a moved copy, made in its part or
    in a later part on that device through a view a part returned, lands on the tensor moved after that part
    (:class:`OnDevice`, one :class:`Transfers` per call). Not under ``torch.inference_mode`` where a part moves a
    tensor (inference tensors have no version counter: ``RuntimeError``).

    Raises:
        TypeError: ``graph``, ``cluster`` or ``placement`` is of the wrong type (names it).
        UnsupportedGraphError: ``graph`` was not imported from a ``torch.export`` inference program.
        InvalidPlacementError: the placement is not for ``graph`` and ``cluster``, or a device maps to no torch
            device (names it), or two map to one other than ``cpu`` without ``device_map`` entries (names them).
    """
    check_types(graph, cluster, placement)
    program = _program(graph)
    devices = framework_devices(cluster, torch_device, device_map)
    # No _guards_fn: its call_module node is no op of the graph (and split_module would put it in a part); the
    # pre-hook that checks inputs instead does not survive the split, so _InputCheck puts the check back.
    gm = program.module(check_guards=False)
    nodes = {n.name: n for n in gm.graph.nodes if n.op == "call_function"}
    parts = device_parts(graph, cluster, placement, skip=[i for i, op in enumerate(graph.op_names)
                                                          if op not in nodes])
    for d in sorted({part.device for part in parts}):
        _check_usable(devices[d], f"cluster device {cluster.device_names[d]!r}")
    owner = part_of(parts, graph.num_ops)
    part_ids = _node_parts(gm, graph, owner)
    for name, k in part_ids.items():
        _retarget(nodes[name], devices[parts[k].device], gm)
        nodes[name].target = LAYOUT_FREE.get(nodes[name].target, nodes[name].target)  # as torch-v1 runs them
    first = _free_part_number(gm)
    split = torch.fx.passes.split_module.split_module(gm, gm, lambda node: first + part_ids[node.name])
    names = {f"submod_{first + k}": k for k in sorted(set(part_ids.values()))}
    _in_part_order(split.graph, names)
    _share_transfers(split, names)
    split.graph._codegen = gm.graph._codegen  # takes and returns the exported module's (nested) inputs and outputs
    split.recompile()
    for name, k in names.items():
        setattr(split, name, OnDevice(split.get_submodule(name), devices[parts[k].device]))
    _home_weights(split)
    _check_inputs(split, program)
    return split


def _check_inputs(split: torch.fx.GraphModule, program: Any) -> None:
    """Call an :class:`_InputCheck` of the program's inputs first, as ``ExportedProgram.module()`` calls its
    ``_guards_fn`` (a node of the graph, so a copy of the split program checks too)."""
    from torch.export.graph_signature import InputKind

    placeholders = split.graph.find_nodes(op="placeholder")
    inputs = [n for n, spec in zip(program.graph.find_nodes(op="placeholder"), program.graph_signature.input_specs,
                                   strict=True) if spec.kind == InputKind.USER_INPUT]
    if not placeholders or len(inputs) != len(placeholders):  # (a program torch unlifts otherwise: no check)
        return
    name = _free_name(split, "_input_check")
    setattr(split, name, _InputCheck(program, inputs, [str(node.target) for node in placeholders]))
    with split.graph.inserting_after(placeholders[-1]):
        split.graph.call_module(name, tuple(placeholders))
    split.graph.lint()
    split.recompile()
    names = list(inspect.signature(split.forward).parameters)  # the program's (torch's pytree codegen)
    args_spec, kwargs_spec = _children(program.call_spec.in_spec)
    if names == [*names[:args_spec.num_children], *kwargs_spec.context]:
        specs = [*_children(args_spec), *_children(kwargs_spec)]
        split.register_forward_pre_hook(_NestingCheck(dict(zip(names, specs, strict=True))), with_kwargs=True)


def _children(spec: pytree.TreeSpec) -> list[pytree.TreeSpec]:
    """A tree spec's children (``children_specs`` is deprecated from torch 2.10 or so)."""
    return list(spec.children()) if callable(getattr(spec, "children", None)) else list(spec.children_specs)


class _NestingCheck:
    """Forward pre-hook: each input of a split program nests its tensors as the exported program's does (its
    flattening reads the leaves it expects and drops any others), as ``ExportedProgram.module()`` checks in its
    pre-hook. A missing or extra input is left to Python's call (a ``TypeError`` naming it)."""

    def __init__(self, specs: dict[str, Any]) -> None:
        self.specs = specs
        self.signature = inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                            for name in specs])

    def __call__(self, _module: nn.Module, args: tuple, kwargs: dict) -> None:
        try:
            given = self.signature.bind(*args, **kwargs).arguments
        except TypeError:
            return
        for position, (name, spec) in enumerate(self.specs.items()):
            if spec.num_leaves != 1 and (got := pytree.tree_structure(given[name])) != spec:
                raise ValueError(f"the split program's input {name!r} (input {position}) nests its values as "
                                 f"{pytree.treespec_pprint(got)}, the exported program's as "
                                 f"{pytree.treespec_pprint(spec)}")


class _InputCheck(nn.Module):
    """The inputs of a split program (flattened as the exported program's) against the program's input specs.
    Shapes are checked by torch's own check of ``ExportedProgram`` inputs (``_check_input_constraints_for_graph``:
    tensor or not, rank, static sizes, ``Dim`` ranges and equalities, constants), which
    ``ExportedProgram.module(check_guards=False)`` runs in a forward pre-hook that ``split_module`` does not carry
    over; the dtype, which torch leaves to the ops, here. A pickled split program checks nothing (the program's
    fake tensors do not pickle)."""

    _is_impure = True  # no users: dead code elimination keeps it all the same, as torch's _guards_fn

    def __init__(self, program: Any, placeholders: list[torch.fx.Node], names: list[str]) -> None:
        super().__init__()
        self.placeholders = placeholders  # the program's user inputs: meta["val"] has their (symbolic) sizes
        self.specs = [n.meta.get("val") for n in self.placeholders]
        self.range_constraints = program.range_constraints
        self.names = names
        # torch's messages name an input by its path, "'x'.shape[1]" (keyword x), as its name in the graph
        self.paths = [(pytree.SequenceKey(1), pytree.MappingKey(name)) for name in names]
        self.passed: set[tuple] = set()  # what inputs that passed were like: dtypes and shapes, other values

    def forward(self, *inputs: Any) -> None:
        if torch.compiler.is_dynamo_compiling():
            return
        key = tuple((x.dtype, x.shape) if isinstance(x, torch.Tensor) else (type(x), x) for x in inputs)
        try:
            if key in self.passed:  # torch's check (sympy) takes ~100 us; the key ~2 us
                return
        except TypeError:  # unhashable: a symbolic size, say
            key = None
        self._check(inputs)
        if key is not None:
            if len(self.passed) >= 256:
                self.passed.clear()
            self.passed.add(key)

    def _check(self, inputs: tuple) -> None:
        try:  # torch's own (private) check; a torch without it leaves the dtype check alone
            from torch._export.utils import _check_input_constraints_for_graph
        except ImportError:
            _check_input_constraints_for_graph = None
        try:
            if _check_input_constraints_for_graph is not None:
                _check_input_constraints_for_graph(self.placeholders, list(zip(self.paths, inputs, strict=True)),
                                                   self.range_constraints)
        except RuntimeError as e:
            raise ValueError(f"the split program's inputs do not match those of the exported program "
                             f"({', '.join(self.names)}): {e}") from None
        for position, (given, spec) in enumerate(zip(inputs, self.specs, strict=True)):
            if isinstance(spec, torch.Tensor) and given.dtype != spec.dtype:
                raise ValueError(f"the split program's inputs do not match those of the exported program "
                                 f"({', '.join(self.names)}): input {self.names[position]!r} (input {position}) has "
                                 f"dtype {given.dtype}, expected {spec.dtype}")

    def __deepcopy__(self, memo: dict) -> _InputCheck:
        return self  # it holds the program's graph and fake tensors, not to be copied (a copy checks the same)

    def __reduce__(self) -> Any:
        return _Unchecked, ()


class _Unchecked(nn.Module):
    """What a pickled split program's :class:`_InputCheck` becomes."""

    def forward(self, *_: Any) -> None:
        return None


def _free_part_number(gm: torch.fx.GraphModule) -> int:
    """The number of the first part's submodule, ``submod_<n>``: 0, or past every ``submod_<k>`` the program already
    has (the bodies of its ``torch.no_grad`` and ``torch.autocast`` blocks, a model's own module of that name, a split
    program imported again), which a part of that name would replace."""
    taken = [int(name[7:]) for name in dir(gm) if name.startswith("submod_") and name[7:].isdigit()]
    return max(taken, default=-1) + 1


def _free_name(module: nn.Module, name: str) -> str:
    """``name``, or ``name_<k>`` for the least ``k`` >= 1 that makes it one ``module`` lacks: the split program holds
    the program's root parameters, buffers and modules, and a model's own ``_transfers`` would be replaced."""
    taken = set(dir(module))
    return next(free for k in range(len(taken) + 1) if (free := f"{name}_{k}" if k else name) not in taken)


def _in_part_order(graph: torch.fx.Graph, names: Mapping[str, int]) -> None:
    """Call the submodules (``names``: submodule -> part) in part order, each followed by the ``getitem`` nodes
    that unpack its results. ``split_module`` orders them by the data they pass only, but parts may also have to
    run in order for a write in place (the graph's 0-byte edges): the write after an earlier read of the tensor,
    before a later one."""
    output = graph.output_node()
    calls = [n for n in graph.nodes if n.op == "call_module" and n.target in names]
    for call in sorted(calls, key=lambda n: names[n.target]):
        output.prepend(call)
        for user in list(call.users):
            if user.op == "call_function" and user.target is operator.getitem:
                output.prepend(user)
    graph.lint()


def _share_transfers(split: torch.fx.GraphModule, names: Mapping[str, int]) -> None:
    """Make a :class:`Transfers` first thing in each call (a submodule call, which a pickled split program's
    retrace keeps) and hand it to every part (``names``: its submodules; keyword ``transfers``)."""
    calls = [n for n in split.graph.nodes if n.op == "call_module" and n.target in names]
    if not calls:
        return
    name = _free_name(split, "_transfers")
    setattr(split, name, _NewTransfers())
    with split.graph.inserting_before(calls[0]):
        transfers = split.graph.call_module(name)
    for call in calls:
        call.kwargs = {**call.kwargs, "transfers": transfers}
    split.graph.lint()


class _NewTransfers(nn.Module):
    """A fresh :class:`Transfers`."""

    def forward(self) -> Transfers:
        return Transfers()


def _home_weights(split: torch.fx.GraphModule) -> None:
    """Put each weight read by one device's parts on that device once, rather than copying it every call (a new
    tensor: the exported program's own weights stay where they are)."""
    for node in split.graph.nodes:
        if node.op != "get_attr":
            continue
        homes = {split.get_submodule(u.target).device for u in node.users if u.op == "call_module"}
        owner_path, _, attr = node.target.rpartition(".")
        owner = split.get_submodule(owner_path)
        value = getattr(owner, attr)
        if len(homes) == 1 and isinstance(value, torch.Tensor) and value.device != (home := homes.pop()):
            moved = value.detach().to(home)
            setattr(owner, attr, nn.Parameter(moved, value.requires_grad) if isinstance(value, nn.Parameter)
                    else moved)


def module_device_map(graph: OpGraph, cluster: Cluster, placement: Placement, *,
                      device_map: Mapping[str, str] | None = None) -> dict[str, str]:
    """Module path -> torch device of every module that owns parameters or buffers (Accelerate-style).

    A module goes to the device that runs the largest share of its own ops' compute (ties: the lowest device
    index); a module with no ops of its own, to that of its nearest ancestor with ops (else the first device).

    Raises:
        TypeError: ``graph``, ``cluster`` or ``placement`` is of the wrong type (names it).
        UnsupportedGraphError: ``graph`` was not imported from a ``torch.export`` inference program.
        InvalidPlacementError: the placement is not for ``graph`` and ``cluster``, or a device maps to none.
    """
    check_types(graph, cluster, placement)
    program = _program(graph)
    placement.validate(graph, cluster)
    devices = framework_devices(cluster, torch_device, device_map)
    cost = graph.durations(cluster)
    share: dict[str, Counter] = {}
    for op, path in graph.source.module_paths.items():
        i = graph.op_index[op]
        d = int(placement.devices[i])
        share.setdefault(path, Counter())[d] += float(cost[i, d]) + 1e-12
    owners = sorted({spec.target.rpartition(".")[0] for spec in program.graph_signature.input_specs
                     if spec.kind.name in ("PARAMETER", "BUFFER")})  # non-persistent buffers too
    out = {}
    for path in owners:
        found = next((share[p] for p in _ancestors(path) if p in share), Counter({0: 1.0}))
        best = max(sorted(found), key=lambda d: found[d])
        out[path] = str(devices[best])
    return out


def dispatch(module: nn.Module, device_map: Mapping[str | int, str]) -> nn.Module:
    """Move each module named in ``device_map`` to its device, and its inputs there before each call.

    Args:
        module: the module.
        device_map: module path (``""``: ``module`` itself; an int: that child of an ``nn.Sequential`` or
            ``nn.ModuleList``) -> torch device.

    Raises:
        ValueError: ``device_map`` is not a mapping, or a key is not a module path (names it).
        InvalidPlacementError: a name in ``device_map`` is not a submodule of ``module``, or its device is not a
            torch device or not one this machine can use (names the entry; before anything moves).
    """
    targets = {}
    for path, device in _paths(device_map).items():
        try:
            targets[path] = torch.device(device)
        except (RuntimeError, TypeError, ValueError) as e:  # torch's own error named neither the entry nor gplace
            raise InvalidPlacementError(f"device_map[{path!r}] = {device!r} is not a torch device "
                                        f"({str(e).splitlines()[0]})") from None
        _check_usable(targets[path], f"module {path!r}")
    for path, target in sorted(targets.items(), key=lambda item: item[0].count(".")):
        try:
            sub = module.get_submodule(path)
        except AttributeError:
            raise InvalidPlacementError(f"device_map names module {path!r}, which the model lacks") from None
        for tensor in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
            tensor.data = tensor.data.to(target)
        sub.register_forward_pre_hook(lambda _, args, kwargs, target=target: (to_device(args, target),
                                                                              to_device(kwargs, target)),
                                      with_kwargs=True)
    return module


def _paths(device_map: Any) -> dict[str, Any]:
    """:func:`dispatch`'s ``device_map`` keyed by module path: an int key as its str (``0``: ``"0"``)."""
    if not isinstance(device_map, Mapping):
        raise ValueError(f"device_map must map module paths to torch devices, e.g. {{'encoder': 'cuda:0'}}, got "
                         f"{device_map!r}")
    paths: dict[str, Any] = {}
    for key, device in device_map.items():
        if isinstance(key, bool) or not isinstance(key, str | numbers.Integral):
            raise ValueError(f"device_map key {key!r} is not a module path (a str such as 'encoder.0', or an int "
                             "for a child of an nn.Sequential)")
        if str(key) in paths:
            raise ValueError(f"device_map names module {str(key)!r} twice (as an int and as a str)")
        paths[str(key)] = device
    return paths


def _check_usable(device: torch.device, what: str) -> None:
    """Refuse a torch device this machine lacks (torch raised a bare AssertionError from inside, mid-move)."""
    reason = unavailable_reason(device)
    if reason:
        raise InvalidPlacementError(f"{what} maps to torch device {str(device)!r}, which this machine cannot use "
                                    f"({reason}); map it to one it has with device_map")


class PipelineSplit(NamedTuple):
    """What :func:`pipeline_split` returns."""

    pipe: Pipe
    """The ``torch.distributed.pipelining.Pipe``: ``pipe.split_gm`` holds ``submod_pp_<k>``, one per stage; call
    ``pipe(*inputs)`` to run the stages one after another locally."""
    devices: list[torch.device]
    """The torch device of each stage."""
    cluster_devices: list[int]
    """The cluster device (index) of each stage; a device holding several stages appears once per stage."""
    split_points: list[str]
    """The module paths where a stage begins (the keys of the ``split_spec`` the module was traced with)."""


def pipeline_split(graph: OpGraph, cluster: Cluster, placement: Placement, module: nn.Module, example_inputs: Any,
                   *, device_map: Mapping[str, str] | None = None, training: bool | None = None,
                   stage_backward: bool = False, sums_shared_gradients: bool = False) -> PipelineSplit:
    """Split ``module`` (the module ``graph`` was imported from) into pipeline stages at the modules where the
    placement moves to another device.

    Args:
        graph: imported with :func:`gplace.from_torch` from ``module``.
        cluster: the devices.
        placement: the placement of ``graph`` on ``cluster``.
        module: the ``nn.Module``; a copy is traced, so it is left as it was and can be split again.
        example_inputs: one micro-batch's inputs: a tensor, a tuple of positional inputs or a dict of keyword
            inputs (as :func:`gplace.from_torch` takes them); call the pipe with them the same way.
        device_map: cluster device name -> torch device for other names (default: none).
        training: whether the pipe will run backward (torch's ``PipelineStage`` under a schedule with a
            ``loss_fn``). (default: None: the graph's, ``gplace.from_torch(..., training=True)``)
        stage_backward: run each backward op in its forward op's stage, as torch does, whatever the placement
            says of it (``torch-pipeline-v1`` measures so); by default a placement that puts any elsewhere is
            refused. (default: False)
        sums_shared_gradients: the caller sums the gradients of a parameter several stages hold (``torch-pipeline-v1``
            does): no warning of it. (default: False)

    A stage output that two or more later stages read (a skip connection over a stage) is one torch's pipelining
    cannot run backward through (``PipeliningMetadataError: Backward of skip connections not supported yet``):
    refused for training (:class:`PipelineSkipError`), else logged as a WARNING naming the value and the stages.
    A parameter or buffer that two or more stages hold (a weight tied between modules of different stages) is
    copied into each by torch, and each stage computes only its part of the gradient: logged as a WARNING naming
    it (sum or all-reduce the copies' gradients before each optimiser step, or the copies drift apart).

    Raises:
        TypeError: ``graph``, ``cluster`` or ``placement`` is of the wrong type (names it).
        ValueError: ``training`` is neither a bool nor ``None``, or ``stage_backward`` or ``sums_shared_gradients``
            no bool (names it).
        UnsupportedGraphError: ``graph`` was not imported from a torch module (:func:`gplace.from_torch`, an
            inference or a training graph: it needs the module paths of its ops), or torch's pipelining cannot
            trace ``module`` (names its class and torch's reason).
        InvalidPlacementError: the placement is not for ``graph``, or it changes device inside a module (names
            the op and the module), so no module-level split gives it, or (unless ``stage_backward``) it puts
            backward ops on another device than their forward ops (names how many and one), which torch does not
            run; :class:`PipelineSkipError` for training with a skip connection over a stage.
    """
    from gplace.pipeline.stages import split_spec

    check_flags("pipeline_split", **({} if training is None else {"training": training}),
                stage_backward=stage_backward, sums_shared_gradients=sums_shared_gradients)
    check_types(graph, cluster, placement)
    _module_paths(graph)
    placement.validate(graph, cluster)
    spec = split_spec(graph, placement)
    if spec.unaligned:
        first = spec.unaligned[0]
        raise InvalidPlacementError(f"the placement changes device at op {first['op']!r}, inside module "
                                    f"{first['module']!r}: no module-level pipeline split gives it; place "
                                    "gplace.pipeline.stages.align_to_modules(graph) instead (graph.align_to_modules="
                                    "true on the command line), whose placements split only where a module begins")
    if spec.backward_away and not stage_backward:
        first_away = next(i for i, f in enumerate(graph.grad_of)
                          if f >= 0 and placement.devices[i] != placement.devices[f])
        forward = int(graph.grad_of[first_away])
        names = cluster.device_names
        raise InvalidPlacementError(_backward_away_message(
            "the placement", spec.backward_away,
            f" (op {graph.op_names[first_away]!r} on {names[placement.devices[first_away]]}, the backward of "
            f"{graph.op_names[forward]!r} on {names[placement.devices[forward]]})"))
    pipe = _traced_pipeline(module, example_inputs, spec.split_spec, len(spec.stage_devices))
    _check_stages(pipe, module, getattr(graph.source, "training", False) if training is None else training,
                  shared=not sums_shared_gradients)
    devices = framework_devices(cluster, torch_device, device_map, distinct=False)  # stages stay apart on one
    return PipelineSplit(pipe, [devices[d] for d in spec.stage_devices], spec.stage_devices, list(spec.split_spec))


def _backward_away_message(what: str, count: int, example: str) -> str:
    return (f"{what} puts {count} backward op{'s' * (count != 1)} on another device than the forward op "
            f"{'they differentiate' if count != 1 else 'it differentiates'}{example}: "
            "torch's pipelining runs each stage's backward on the stage's device, so no pipeline split gives this "
            "placement; place gplace.pipeline.stages.align_to_modules(graph) instead (graph.align_to_modules=true "
            "on the command line), which keeps each backward op with its forward op")


class PipelineSkipError(InvalidPlacementError):
    """A stage output that two or more later stages read (a skip connection over a stage), in a pipe that will run
    backward: torch's pipelining cannot (``Backward of skip connections not supported yet``)."""


def _skip_connections(pipe: Any) -> list[tuple[str, int, list[int]]]:
    """The stage outputs of ``pipe`` that two or more later stages read: (value name, its stage, the stages that
    read it)."""
    stage_of = {f"submod_pp_{k}": k for k in range(pipe.num_stages)}
    found = []
    for node in pipe.split_gm.graph.nodes:
        if node.op != "call_module" or node.target not in stage_of:
            continue
        submod = pipe.split_gm.get_submodule(node.target)
        returned = [n for out in submod.graph.find_nodes(op="output") for n in out.all_input_nodes]
        values = [(u, u.args[1]) for u in node.users if u.op == "call_function" and u.target is operator.getitem]
        values = values or [(node, 0)]
        for value, index in values:
            readers = sorted({stage_of[u.target] for u in value.users
                              if u.op == "call_module" and u.target in stage_of})
            if len(readers) > 1:
                name = returned[index].name if isinstance(index, int) and index < len(returned) else value.name
                found.append((name, stage_of[node.target], readers))
    return found


def _shared_state(pipe: Any, module: nn.Module) -> list[tuple[str, list[int]]]:
    """Each parameter or buffer of ``module`` that two or more stages of ``pipe`` hold a copy of (a weight tied
    between modules of different stages, a module called in two): (its first name, the stages)."""
    canonical = first_names(module, buffers=True)
    held: dict[str, set[int]] = {}
    for k in range(pipe.num_stages):
        submod = pipe.split_gm.get_submodule(f"submod_pp_{k}")
        for name, _ in [*submod.named_parameters(remove_duplicate=False),
                        *submod.named_buffers(remove_duplicate=False)]:
            plain = first_call_name(name)
            held.setdefault(canonical.get(name) or canonical.get(plain, plain), set()).add(k)
    return [(name, sorted(stages)) for name, stages in held.items() if len(stages) > 1]


def first_names(module: nn.Module, *, buffers: bool = False) -> dict[str, str]:
    """Every name of every parameter (and with ``buffers``, buffer) of ``module`` -> its first name (a tied weight
    has several)."""
    first: dict[int, str] = {}
    named = [*module.named_parameters(remove_duplicate=False),
             *(module.named_buffers(remove_duplicate=False) if buffers else ())]
    return {name: first.setdefault(id(t), name) for name, t in named}


def first_call_name(name: str) -> str:
    """A pipeline stage's parameter name with torch's copy suffixes dropped: ``s@1.weight`` (the copy of module
    ``s`` for its second call, which pipelining makes where the calls fall in different stages) -> ``s.weight``."""
    return ".".join(re.sub(r"@\d+$", "", part) for part in name.split("."))


def _check_stages(pipe: Any, module: nn.Module, training: bool | None, *, shared: bool = True) -> None:
    """Refuse (``training``) or log (``None``, ``False``: the pipe may yet run backward) a skip connection over a
    stage; log (``shared``) each parameter or buffer that several stages hold."""
    skips = _skip_connections(pipe)
    if skips:
        text = "; ".join(f"{name!r} of stage {k} is read by stages {', '.join(map(str, readers))}"
                         for name, k, readers in skips)
        why = (f"torch.distributed.pipelining cannot run backward through a stage output that two or more later "
               f"stages read (a skip connection over a stage: PipeliningMetadataError: Backward of skip connections "
               f"not supported yet): {text}")
        if training:
            raise PipelineSkipError(f"{why}; choose a split where each stage's outputs go to one stage (place with "
                                    "fewer devices, or keep the modules the skip spans on one device)")
        logger.warning("%s; forward and inference run, training through this pipe fails in torch", why)
    for name, stages in _shared_state(pipe, module) if shared else []:
        logger.warning("%r is held by pipeline stages %s, each a copy of its own (torch copies a tied weight into "
                       "every stage using it, each computing only its part of the gradient): sum or all-reduce the "
                       "copies' gradients before each optimiser step, or they drift apart", name,
                       ", ".join(map(str, stages)))


def check_pipeline_split(graph: OpGraph, module: nn.Module, example_inputs: Any) -> None:
    """Refuse, once before a search, what :func:`pipeline_split` refuses whatever the placement: a graph without
    module paths, or a module torch's pipelining cannot trace (traced here once, unsplit).

    Raises:
        UnsupportedGraphError: as :func:`pipeline_split` (names the graph, or the module's class and torch's
            reason).
    """
    _module_paths(graph)
    _check_same_module(graph, module)
    _traced_pipeline(module, example_inputs, {}, None)


def _check_same_module(graph: OpGraph, module: nn.Module) -> None:
    """Refuse a ``module`` whose parameters the torch graph ``graph`` does not hold (by shape, each as often): the
    graph was imported from another module, whose placement would be measured on this one.

    Raises:
        UnsupportedGraphError: names the first parameter of ``module`` that the graph lacks.
    """
    source = graph.source
    held = source.program.state_dict.values() if isinstance(source.program, torch.export.ExportedProgram) \
        else source.values.values()
    shapes = Counter(tuple(t.shape) for t in held if isinstance(t, torch.Tensor))
    for name, parameter in module.named_parameters():
        shape = tuple(parameter.shape)
        if not shapes[shape]:
            raise UnsupportedGraphError(
                f"graph {graph.name!r} was not imported from this {type(module).__name__}: its parameter {name!r} of "
                f"shape {list(shape)} is not among the graph's; give the runtime the module the graph was imported "
                "from (from the command line, runtime.module the same as graph.module)")
        shapes[shape] -= 1


def pipeline_from_file(path: str | Path, module: nn.Module, example_inputs: Any) -> Pipe:
    """The ``torch.distributed.pipelining`` Pipe of the stages a ``placement.json`` chose for ``module`` (written
    by ``gplace place`` or any run on a graph from :func:`gplace.from_torch`), without the graph: its
    ``split_spec`` becomes ``{module path: SplitPoint.BEGINNING}``. ``pipe.build_stage(k, device)`` then gives
    stage ``k`` in the process of its device, the file's ``stage_devices[k]``.

    As :func:`pipeline_split`, it logs a WARNING naming a stage output that two or more later stages read (torch
    cannot run backward through it; the file does not say whether the pipe will train) and each parameter or
    buffer that several stages hold (sum their gradients).

    Raises:
        ValueError: the file is no ``placement.json`` of a version this gplace reads, has no ``split_spec`` (its
            graph was not imported from torch), or one of its fields
            is malformed (``split_spec`` no object of module paths, ``split_unaligned`` no list of objects with
            ``op`` and ``module``, ``split_backward_away`` no whole number >= 0, ``stage_devices`` no list of
            device names), naming the file and the field.
        InvalidPlacementError: the placement changes device inside a module (the file's ``split_unaligned``), or
            puts backward ops on another device than their forward ops (``split_backward_away``), or ``module``
            lacks a split's module path or splits into another number of stages than the file's.
        UnsupportedGraphError: torch's pipelining cannot trace ``module`` (names its class and torch's reason).
    """
    from gplace.ir.serialize import check_placement_header, load_json

    doc = load_json(path)
    check_placement_header(doc, path)
    if "split_spec" not in doc:
        raise ValueError(f"{path} has no split_spec: its graph was not imported from a torch module")
    _check_split_fields(path, doc)
    if doc.get("split_unaligned"):
        first = doc["split_unaligned"][0]
        raise InvalidPlacementError(f"{path}: the placement changes device at op {first['op']!r}, inside module "
                                    f"{first['module']!r}: no module-level pipeline split gives it")
    if doc.get("split_backward_away"):
        raise InvalidPlacementError(_backward_away_message(f"{path}: the placement", int(doc["split_backward_away"]),
                                                           " (placement.json's split_backward_away)"))
    pipe = _traced_pipeline(module, example_inputs, doc["split_spec"], len(doc.get("stage_devices") or []) or None)
    _check_stages(pipe, module, None)
    return pipe


# ---------------------------------------------------------------------- helpers
def _check_split_fields(path: str | Path, doc: Mapping[str, Any]) -> None:
    """Refuse a malformed split field of placement.json ``path``, naming the file and the field (``"split_spec": 3``
    failed with "'int' object is not iterable", ``"split_unaligned": [{}]`` with ``KeyError: 'op'``)."""
    spec = doc["split_spec"]
    if not isinstance(spec, dict) or not all(isinstance(k, str) and k for k in spec):
        raise ValueError(f"{path}: split_spec must be an object of module paths ({{\"layers.1\": \"BEGINNING\"}}), "
                         f"got {short_repr(spec)}")
    unaligned = doc.get("split_unaligned")
    unaligned = [] if unaligned is None else unaligned
    if not isinstance(unaligned, list):
        raise ValueError(f"{path}: split_unaligned must be a list, got {short_repr(unaligned)}")
    for i, rec in enumerate(unaligned):
        if not isinstance(rec, dict) or not all(isinstance(rec.get(k), str) for k in ("op", "module")):
            raise ValueError(f"{path}: split_unaligned[{i}] must be an object with an 'op' and a 'module' (names), "
                             f"got {short_repr(rec)}")
    check_sizes(str(path), low=0, split_backward_away=doc.get("split_backward_away", 0))
    devices = doc.get("stage_devices")
    if devices is not None and (not isinstance(devices, list) or not all(isinstance(d, str) for d in devices)):
        raise ValueError(f"{path}: stage_devices must be a list of device names, got {short_repr(devices)}")


class PipelineTraceError(UnsupportedGraphError):
    """``torch.distributed.pipelining`` cannot trace the module (with the split asked for): names the module's
    class, the split and torch's reason."""


def _traced_pipeline(module: nn.Module, example_inputs: Any, split: Mapping[str, str], stages: int | None) -> Any:
    """``torch.distributed.pipelining.pipeline`` of a copy of ``module``: it patches the modules it traces, and a
    module traced twice keeps the first split's points as well (a wrong pipe, without an error).

    Raises:
        InvalidPlacementError: ``module`` lacks a split's module path, or torch made another number of stages than
            ``stages`` (the placement's).
        PipelineTraceError: (an ``UnsupportedGraphError``) torch's pipelining cannot trace ``module``
            (``torch.cond``, a keyword-only input, a ``torch.no_grad`` block, ...): names the module's class and
            the first line of torch's reason.
    """
    from torch.distributed.pipelining import SplitPoint, pipeline

    for path in split:
        try:
            module.get_submodule(path)
        except AttributeError:
            raise InvalidPlacementError(f"the split is at module {path!r}, which {type(module).__name__} lacks: is "
                                        "it the module the graph was imported from?") from None
    args, kwargs = example_args(example_inputs)
    traced = copy.deepcopy(module)
    try:  # one trace at a time in the process: torch's tracers, like the warning filters, keep their state there;
        # torch's own deprecations inside its tracer are noise (errors under -W error)
        with tracing(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            pipe = pipeline(traced, mb_args=args, mb_kwargs=kwargs or None,
                            split_spec={path: SplitPoint.BEGINNING for path in split})
    except Exception as e:  # torch's error came from deep inside its tracer, naming neither the module nor gplace
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        where = f"split at {sorted(split)}" if split else "unsplit"
        raise PipelineTraceError(f"torch.distributed.pipelining cannot trace {type(module).__name__} ({where}): "
                                 f"{type(e).__name__}: {reason}") from e
    if stages is not None and pipe.num_stages != stages:
        raise InvalidPlacementError(f"torch split {type(module).__name__} into {pipe.num_stages} stages at "
                                    f"{sorted(split)}, where the placement has {stages}")
    return pipe


def _module_paths(graph: OpGraph) -> Any:
    """The module path of each op of ``graph``: what :func:`pipeline_split` needs (an inference or a training
    graph of :func:`gplace.from_torch`)."""
    source = graph.source
    if not isinstance(source, TorchSource) or not source.module_paths:
        raise UnsupportedGraphError(f"graph {graph.name!r} was not imported from a torch module (gplace.from_torch): "
                                    "its ops have no module paths to split at")
    return source.module_paths


def _program(graph: OpGraph) -> Any:
    source = graph.source
    if not isinstance(source, TorchSource) or source.training:
        raise UnsupportedGraphError(f"graph {graph.name!r} was not imported from a torch.export inference program "
                                    "(gplace.from_torch, training=False); it has no program to split")
    return source.program


def _node_parts(gm: torch.fx.GraphModule, graph: OpGraph, owner: Any) -> dict[str, int]:
    """FX ``call_function`` node name -> part; a ``getitem`` goes with the node whose tuple it reads, and a
    write-back (:func:`_is_write_back`) with the last part, after every read of the value it replaces."""
    parts: dict[str, int] = {}
    write_backs = []
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr", "output"):
            continue
        if node.op != "call_function":
            raise UnsupportedGraphError(f"node {node.name!r} of the program is a {node.op}, not an op")
        if node.target is operator.getitem and node.name not in graph.op_index:
            parts[node.name] = parts[node.args[0].name]
        elif node.name in graph.op_index:
            parts[node.name] = int(owner[graph.op_index[node.name]])
        elif _is_write_back(node):
            write_backs.append(node.name)
        else:
            raise UnsupportedGraphError(f"node {node.name!r} of the program is not an op of graph {graph.name!r}")
    if write_backs and not parts:
        raise UnsupportedGraphError(f"node {write_backs[0]!r} of the program writes a value back, but graph "
                                    f"{graph.name!r} has no op to run it with")
    return {**parts, **dict.fromkeys(write_backs, max(parts.values(), default=0))}


def _is_write_back(node: torch.fx.Node) -> bool:
    """A ``copy_`` that ``ExportedProgram.module()`` adds (no op of the program, so none of the graph): it writes a
    functional program's new value of a buffer or an input (``graph_signature.buffers_to_mutate``,
    ``user_inputs_to_mutate``) into it, as the module does in place."""
    return (node.target is torch.ops.aten.copy_.default and not node.users
            and getattr(node.args[0], "op", None) in ("placeholder", "get_attr"))


def _retarget(node: torch.fx.Node, device: torch.device, gm: torch.fx.GraphModule) -> None:
    """Point a factory op's ``device=`` argument at its part's device; a control-flow op's too, in each branch or
    body it runs (graph modules of ``gm`` it reads)."""
    if "device" in node.kwargs:
        node.kwargs = {**node.kwargs, "device": device}
    for arg in node.all_input_nodes:
        sub = attribute_of(gm, arg)
        if isinstance(sub, torch.fx.GraphModule):
            for inner in [n for n in sub.graph.nodes if n.op == "call_function"]:
                _retarget(inner, device, sub)
            sub.recompile()


def _ancestors(path: str) -> list[str]:
    """``"a.b.c"`` -> ``["a.b.c", "a.b", "a", ""]``."""
    parts = path.split(".") if path else []
    return [".".join(parts[:k]) for k in range(len(parts), -1, -1)]
