"""Write placements back into the programs they came from, as programs that run.

- :mod:`gplace.export.onnx`: an annotated ONNX model, and one ONNX model per device run in order;
- :mod:`gplace.export.tensorflow`: a ``GraphDef`` with every ``NodeDef.device`` set;
- :mod:`gplace.export.torch`: a ``torch.fx.GraphModule`` split into per-device submodules, and a module-level
  ``device_map``;
- :mod:`gplace.export.parts` (no framework): the per-device parts, in an order they can run in.

Each framework is imported only inside its own module.
"""

from gplace.export.parts import Part, device_parts, part_of

__all__ = ["Part", "device_parts", "part_of"]
