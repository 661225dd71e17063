"""Import an ONNX model into gplace's op graph.

This package is the only place in gplace's importers that imports ``onnx``; it is imported lazily, inside the
functions. Its modules: :mod:`.importer` (:func:`from_onnx`, one op per node), :mod:`.shapes` (input shapes,
inference, folding shape arithmetic), :mod:`.control` (the costs of control-flow nodes), :mod:`.tensors`
(tensor types, a node's reads and subgraphs).

How a model maps onto the IR:

- **One op per node**, named ``node.name``, or ``"<op_type>_<i>"`` (``i`` the node's position) where that is
  empty. A name already taken (by an input's or a shared weight's op, or an earlier node's) takes the first free
  ``_<k>`` suffix, ``k`` from 1. Names made so (generated or suffixed) skip every name a node of the model is
  given, so a node keeps its given name unless an input, a shared weight or an earlier node has it. Op types of
  non-default domains are written ``"<domain>::<op_type>"``.
- **Graph inputs** that are not initialisers become ``"Input"`` ops (cost 0) named after the tensor, so that
  moving the input to the device of its consumers is a transfer like any other.
- **Initialisers** (dense or sparse) are weights: one read by a single node is *folded* into that node's
  ``persistent_memory``; one shared by several nodes (tied weights, an unrolled RNN's matrices, shape
  constants) or by none becomes an ``"Initializer"`` op (cost 0) holding it as persistent memory, with an
  edge to every reader, so a reader on another device pays for the copy. ``Constant`` nodes are ops whose
  value is their persistent memory. Either holds its bytes once: its ``output_bytes`` are 0 (as TensorFlow's
  variables and constants), its edges carry the value's bytes.
- **Edges** run from a tensor's producer to each node reading it; several tensors between the same two ops
  make one edge carrying their summed bytes. Bytes are ``numel * itemsize`` from the inferred shape and dtype
  (sub-byte types count fractions of a byte; strings count 8 bytes an element, an estimate).
- **Costs**: ``kind_cost`` from the analytic model in :mod:`gplace.costmodel` (roofline on the reference GPU
  and CPU); ``cost`` is left ``None``. A call of a model-local function costs its body's nodes: the call is inlined
  (``onnx.inliner``: its attribute references take the call's attribute values, the calls inside it are inlined
  too) into a model of its own, for costing only (the call stays one op), whose inputs have the types and, where
  the main graph knows them (small initialisers, ``Constant`` outputs, folded shape arithmetic), the values of the
  call's, and shapes are inferred as the main graph's are; a call inside a control-flow subgraph, one onnx cannot
  inline, or one whose inlined body would have more than 100,000 nodes (``INLINE_LIMIT``: functions each calling the
  one below twice inline to 2**depth nodes from a few KB), costs its body's nodes with shapes inferred node by node
  from the call's input types (calls inside it likewise, up to 64 deep). Calls alike are costed once: top-level
  calls of one function with the same attributes, input types (or known values) and output types, and, node by
  node, calls of one function on the same input types; so a nest of such functions costs each body once per
  depth, its sum still exact. The function called is the one of the call's domain, op type and ``overload``
  (IR 10: several functions of one name, told apart by their overload).
- **Shapes**: ``onnx.shape_inference`` (non-strict, with data propagation) after the dynamic dimensions of the inputs
  are fixed from ``input_shapes`` (a symbol several inputs share must be given one size; an ``STFT`` without
  ``onesided`` has it written out first, as the spec's default 1, which onnx's inference reads as 0). The types the
  model declares for its values (``value_info``, the graph outputs' shapes) are set aside first, so that sizes follow
  from the input shapes: a tool may have left them at the size the model was exported at (one that makes only the
  inputs and outputs dynamic). A declared type is taken only where inference leaves a value unknown (a custom op's
  output, a data-dependent size), and inference runs again from it; a declared fixed shape that the inferred one
  contradicts is logged (INFO), and the kept model holds the inferred shapes. Where inference leaves a consumed
  tensor's shape unknown (a ``Slice`` or ``Reshape`` whose bounds come from ``Shape -> Gather -> Mod -> ...``), the
  *shape arithmetic* is folded: nodes whose inputs are all small known values (initialisers, ``Constant`` outputs,
  ``Shape``/``Size`` of statically shaped tensors) are evaluated with ``onnx.reference``, their outputs become
  constants in a copy of the model, and inference runs again, while new values appear (or until the graph's outputs
  are known too). A ``Loop`` or ``Scan`` output that inference leaves unknown is found by inferring the body node by
  node from the carried values' initial types: a carried value one pass gives back with its shape keeps it; one that
  changes (a decoder's growing output) takes its shape after a constant trip count's passes; a ``Loop``'s scan output
  is its body's value stacked trip-count times, a ``Scan``'s (where onnx's inference of the body fails: one that reads
  an outer ``Constant``, say) its body's value stacked along ``scan_output_axes`` as long as its first sequence. The
  copy only teaches shapes: the kept model has the original nodes (folded ones stay ops). A consumed tensor whose
  shape stays unknown is an error (where its producer's op is one onnx has no inference rule for, such as the
  onnxruntime contrib ops its optimiser writes, ``FusedMatMul``, ``QGemm``, the error names its domain and type and
  says to save the model before onnxruntime's extended optimisations or to add ``value_info`` for its outputs; where
  it is computed from graph inputs that look like values, scalars or integer vectors such as an ``axes`` or ``shape``
  input, the error names them: gplace sizes tensors from the inputs' shapes, not their values); an unknown output
  nobody reads counts 0 bytes, with a warning.
- **Control flow** (``If``, ``Loop``, ``Scan``: any node with a graph attribute) is one op, placed as a unit
  (its subgraphs run where it runs). Its inputs are the node's own and the outer values its subgraphs read
  (ONNX's implicit inputs, :func:`node_reads`), so a producer on another device pays for the copy. Its cost is
  that of its subgraphs' nodes (shapes as inferred inside them; a body's carried input without a known shape
  takes its initial value's, a ``Scan`` element its sequence's less the scanned axis): the dearer branch of an
  ``If`` (the branch it takes where its condition folds from shape arithmetic); a ``Loop``'s body times its
  trip count ``M`` when that is a constant or folded shape arithmetic (at the top level: ``Gather(Shape(x), 0)``
  for ``range(x.size(0))``) and below 2**31 - 1 (a while loop's bound, such as INT64_MAX, is no count), a
  ``Scan``'s body times its sequence length, else one trip, with a warning. Body
  nodes are inferred from the main graph's small known values too (an outer ``Constant`` an ``Unsqueeze`` takes its
  axes from); those with a shape left unknown count 0 seconds, with a warning; the weights of the subgraphs are the op's
  persistent memory, and what one pass of a subgraph holds at once (its outputs not counted; a branch's, the
  larger, or the one taken) its ``temporary_memory``.
- **Quantised (QDQ) models**: a ``DequantizeLinear`` read by exactly one node is put in a colocation group with
  that node (``Op.colocation`` ``"qdq:<reader's op name>"``; a reader that already has a group takes the
  ``DequantizeLinear`` into it, so the several of one ``MatMul`` share one group). In ONNX's QDQ format the pair
  is one quantised op, which backends fuse (onnxruntime turns a part's ``DequantizeLinear(W) + MatMul`` into
  ``MatMulNBits`` where the activation arrives dequantised, with other numerics than the whole model's), and
  keeping it on one device makes the small integer tensor the one that crosses devices. A
  ``DequantizeLinear`` read by several nodes, or none, is in no group.
"""

from gplace.importers.onnx.importer import OnnxSource, from_onnx
from gplace.importers.onnx.tensors import node_reads, subgraphs

__all__ = ["OnnxSource", "from_onnx", "node_reads", "subgraphs"]
