"""Write placements back into the programs they came from, as programs that run.

- :mod:`gplace.export.onnx`: an annotated ONNX model, and one ONNX model per device run in order;
- :mod:`gplace.export.tensorflow`: a ``GraphDef`` with every ``NodeDef.device`` set, and a placed SavedModel;
- :mod:`gplace.export.torch`: a ``torch.fx.GraphModule`` split into per-device submodules, a module-level
  ``device_map`` and a pipeline split;
- :mod:`gplace.export.parts` (no framework): the per-device parts, in an order they can run in.

Each framework is imported only inside its own module. :func:`write_back` writes what fits the graph's program
into a directory (what ``gplace place`` does); :func:`check_write_back` checks, before placing, that it can map
the cluster's devices.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from gplace.export.parts import Part, device_parts, part_of
from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.placement import check_graph_and_cluster, check_placement
from gplace.ir.serialize import as_path, file_stem, staged, write_bytes_atomic

__all__ = ["Part", "check_write_back", "device_parts", "part_of", "write_back"]

log = logging.getLogger(__name__)


def write_back(graph: OpGraph, cluster: Cluster, placement: Placement, out_dir: str | Path, *,
               device_map: Mapping[str, str] | None = None) -> list[Path]:
    """Write the placed program of ``graph`` into ``out_dir``; the paths written (none for a graph with no
    program, e.g. one read from a gplace JSON file, nor for a ``torch.export`` training graph, with a WARNING).

    - ONNX: ``placed.onnx`` (:func:`~gplace.export.onnx.annotate_onnx`) and ``parts/<kkk>_<device>.onnx``, one
      model per part, in run order by name (:func:`~gplace.export.onnx.split_onnx`); a model whose weights are
      external data writes each file's weights beside it as ``<file>.data`` (:func:`~gplace.export.onnx.save_onnx`).
      All are written in a folder beside them and moved in together once whole, replacing an earlier placement's
      (``parts/`` whole), so an interrupted write-back leaves the earlier ones, never a mix;
    - TensorFlow: ``placed.pb``, the binary ``GraphDef`` with every node's device
      (:func:`~gplace.export.tensorflow.place_graph_def`);
    - torch.export: ``device_map.json``, module path -> device (:func:`~gplace.export.torch.module_device_map`),
      for an inference graph only: a training graph's joint forward+backward program has no module signature to
      map, so nothing is written for it.

    Each file is written beside its place and renamed there (a full disk leaves the earlier file whole).

    Args:
        device_map: cluster device name -> TensorFlow or torch device, for names that are not ``/CPU:k`` or
            ``/GPU:k`` (an ONNX model keeps the cluster's names). (default: None)

    Raises:
        InvalidPlacementError: the placement is not for ``graph`` and ``cluster`` (checked for a graph with no
            program too), or a device maps to none.
        TypeError: ``graph``, ``cluster`` or ``placement`` is of the wrong type (names it).
        OSError: a file cannot be written (a full disk), naming it.
    """
    from gplace.importers.onnx import OnnxSource
    from gplace.importers.tensorflow import TensorFlowSource
    from gplace.importers.torch_export import TorchSource

    check_placement(placement)
    placement.validate(graph, cluster)  # also where nothing is written: a wrong placement is refused alike
    out_dir = as_path(out_dir, "write_back: out_dir")
    source = graph.source
    if isinstance(source, OnnxSource):
        return _write_onnx(graph, cluster, placement, out_dir)
    if isinstance(source, TensorFlowSource):
        from gplace.export.tensorflow import place_graph_def

        graph_def = place_graph_def(graph, cluster, placement, device_map=device_map)
        data = graph_def.SerializeToString(deterministic=True)  # attr maps in key order: the same bytes every run
        return [write_bytes_atomic(out_dir / "placed.pb", data)]
    if isinstance(source, TorchSource) and source.training:
        log.warning("write_back: no device_map.json for %s: it is a torch.export training graph, and a device map "
                    "is made from an inference one (training=False; graph.training=false); write_back=false skips "
                    "writing back", graph.name)
    elif isinstance(source, TorchSource):
        from gplace.export.torch import module_device_map

        text = json.dumps(module_device_map(graph, cluster, placement, device_map=device_map), indent=1)
        return [write_bytes_atomic(out_dir / "device_map.json", text.encode())]
    return []


def check_write_back(graph: OpGraph, cluster: Cluster, *, device_map: Mapping[str, str] | None = None) -> None:
    """Check, before placing, that :func:`write_back` can map every cluster device to one of ``graph``'s program
    (TensorFlow, torch.export inference; an ONNX model keeps the cluster's names).

    Raises:
        TypeError: ``graph`` or ``cluster`` is of the wrong type (names it).
        InvalidPlacementError: a device maps to none, ``device_map`` is no mapping of device names, or two cluster
            devices map to one framework device without ``device_map`` entries saying so (names them).
    """
    from gplace.export.parts import framework_devices
    from gplace.importers.tensorflow import TensorFlowSource
    from gplace.importers.torch_export import TorchSource

    check_graph_and_cluster(graph, cluster)
    source = graph.source
    if isinstance(source, TensorFlowSource):
        from gplace.runtime.tf_runtime import tf_device

        framework_devices(cluster, tf_device, device_map)
    elif isinstance(source, TorchSource) and not source.training:
        from gplace.runtime.torch_devices import torch_device

        framework_devices(cluster, torch_device, device_map)


def _write_onnx(graph: OpGraph, cluster: Cluster, placement: Placement, out_dir: Path) -> list[Path]:
    from gplace.export.onnx import annotate_onnx, save_onnx, split_onnx

    base_dir = graph.source.base_dir
    placed, parts = annotate_onnx(graph, cluster, placement), split_onnx(graph, cluster, placement)
    with staged(out_dir, ("placed.onnx", "placed.onnx.data", "parts")) as stage:
        written = save_onnx(placed, stage / "placed.onnx", base_dir)
        for k, part in enumerate(parts):
            written += save_onnx(part.model, stage / "parts" / f"{k:03d}_{_device_stem(part.device)}.onnx", base_dir)
    return [out_dir / path.relative_to(stage) for path in written]


def _device_stem(device: str) -> str:
    """``device`` as part of a file name: letters and digits kept, the rest ``_`` (``/GPU:0`` -> ``GPU_0``), cut to
    fit with a hash of the name where it is long (:func:`~gplace.ir.serialize.file_stem`): a device named with 300
    characters failed to write its part (``File name too long``)."""
    return file_stem("".join(c if c.isalnum() else "_" for c in device).strip("_"))
