"""ONNX models as FX programs for ``torch-v1``: :func:`onnx_program` and the op tables it merges.

``program`` builds the FX graph; ``ops`` (element-wise, reductions, matrix products), ``shape`` (shape and
indexing), ``nn`` (padding, convolution, pooling, normalisation, resizing) and ``rnn`` (recurrent layers) each hold
one table of converters, ONNX op type -> ``(torch function, kwargs)``.
"""

from gplace.runtime.onnx.program import OnnxProgram, onnx_program

__all__ = ["OnnxProgram", "onnx_program"]
