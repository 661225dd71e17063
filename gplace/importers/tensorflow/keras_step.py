"""A Keras model as a GraphDef: its inference, or one training step (forward, loss and loss weights,
``GradientTape`` gradients, the optimiser's update) traced as one ``tf.function``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gplace.importers.tensorflow.errors import wrap_errors
from gplace.importers.tensorflow.functions import Traced, function_traced
from gplace.ir import UnsupportedGraphError


def keras_traced(tf: Any, model: Any, training: bool, batch_size: int | None, loss: Any,
                 optimizer: Any) -> Traced:
    where = f"Keras model {model.name!r}"
    opt, phases = None, {}
    with wrap_errors(f"{where}: could not trace it"):
        specs = _keras_input_specs(tf, model, batch_size, where)
        if training:
            concrete, opt, phases = _keras_train_step(tf, model, specs, batch_size, loss, optimizer)
        else:
            fn = tf.function(lambda inputs: model(_packed(model, inputs), training=False), input_signature=[specs],
                             autograph=False)
            concrete = fn.get_concrete_function()
    traced = function_traced(tf, concrete)
    names = tuple(getattr(model, "output_names", None) or ())
    if not training and not traced.output_names and len(names) == len(traced.outputs) > 1:
        traced.output_names = names  # a list of outputs, in model.outputs order (a dict's keys are taken already)
    traced.input_names = _input_names(model, traced.inputs)
    traced.name = model.name + ("_train" if training else "")
    traced.keepalive = opt  # the optimiser owns the slot variables the GraphDef refers to
    traced.phases = phases
    return traced


def _input_names(model: Any, inputs: tuple[str, ...]) -> tuple[str, ...]:
    """The Keras name of each of ``inputs`` (the model's inputs, then a training step's targets, named by their
    tensors: ``y0`` for ``y0:0``): TensorFlow names a placeholder after an input's name with ``":"`` made ``"_"``,
    and renames one whose name is taken (inputs ``"in:1"`` and ``"in_1"`` are fed by ``in_1`` and ``in_1_1``)."""
    names = [t.name for t in model.inputs]
    names += [t.rpartition(":")[0] for t in inputs[len(names):]]
    return tuple(names) if len(names) == len(inputs) else ()


def _packed(model: Any, inputs: list[Any]) -> Any:
    """``inputs`` (in ``model.inputs`` order) in the structure the model was built with (a dict, say)."""
    import keras

    structure = getattr(model, "input", None)
    if isinstance(structure, dict | list | tuple) and len(keras.tree.flatten(structure)) == len(inputs):
        return keras.tree.pack_sequence_as(structure, inputs)
    return inputs[0] if len(inputs) == 1 else inputs


def _keras_input_specs(tf: Any, model: Any, batch_size: int | None, where: str) -> list[Any]:
    try:
        inputs = list(model.inputs or [])
    except (AttributeError, ValueError):
        inputs = []
    if not inputs:
        raise UnsupportedGraphError(f"{where} has no symbolic inputs (a subclassed model never built?); build it "
                                    "with keras.Input, or pass a tf.function with an input_signature")
    for t in inputs:
        _refuse_composite(tf, t, where)
    return [_batch_spec(tf, t.shape, t.dtype, batch_size, t.name) for t in inputs]


def _refuse_composite(tf: Any, t: Any, where: str) -> None:
    """Refuse a sparse or ragged input (``keras.Input(sparse=True)``): it would be traced as a dense one, which
    runs other ops (a ``MatMul`` for a sparse one's ``SparseTensorDenseMatMul``), and its values' count is known
    only at run time."""
    spec = getattr(t, "type_spec", None)
    kind = ("sparse" if getattr(t, "sparse", False) or isinstance(spec, tf.SparseTensorSpec) else
            "ragged" if getattr(t, "ragged", False) or isinstance(spec, tf.RaggedTensorSpec) else None)
    if kind is None:
        return
    dims = ["L" if d is None else str(d) for d in list(t.shape)[1:]]
    shape = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
    raise UnsupportedGraphError(
        f"{where}: input {t.name!r} is {kind} (keras.Input({kind}=True)): the count of its values is known only at "
        "run time, and no argument of from_tensorflow sets it (batch_size sets the leading dimension of dense "
        "inputs only). Import the model on a dense input of the shape to place for (L: a ragged one's padded length): "
        f"x = keras.Input({shape}, dtype={tf.dtypes.as_dtype(t.dtype).name!r}); "
        "from_tensorflow(keras.Model(x, model(x)), batch_size=B)"
    )


def _batch_spec(tf: Any, shape: Sequence[int | None], dtype: Any, batch_size: int | None, name: str) -> Any:
    dims = list(shape)
    if dims and dims[0] is None:
        dims[0] = batch_size
    return tf.TensorSpec(dims, tf.dtypes.as_dtype(dtype), name=name.replace(":", "_"))


def _keras_train_step(tf: Any, model: Any, specs: list[Any], batch_size: int | None, loss: Any,
                      optimizer: Any) -> tuple[Any, Any, dict[str, str]]:
    """A concrete ``tf.function`` (forward, loss, ``GradientTape`` gradients, optimiser update), the optimiser, and
    the phase of the ops ``tape.gradient`` (``backward``) and ``apply_gradients`` (``update``) made while tracing,
    by name (:attr:`Traced.phases`). The step is Keras's ``train_step``: each output's loss times its weight, plus
    ``model.losses``, the gradient of the optimiser's ``scale_loss`` of the total; it returns the unscaled total.

    Sparse gradients (``IndexedSlices``, e.g. of an embedding) are made dense before the update: Keras 3's
    sparse update paths branch with ``tf.cond``, which the importer does not handle.
    """
    import keras

    loss_fns = _output_losses(keras, model, loss)
    weights = _loss_weights(model) if loss is None else [1.0] * len(loss_fns)
    targets = []
    for i, (t, fn) in enumerate(zip(model.outputs, loss_fns, strict=True)):
        sparse = "sparse" in str(getattr(fn, "name", None) or getattr(fn, "__name__", ""))
        targets.append(_batch_spec(tf, t.shape[:-1] if sparse else t.shape, "int32" if sparse else t.dtype,
                                   batch_size, f"y{i}"))
    opt = optimizer if optimizer is not None else getattr(model, "optimizer", None) or "sgd"
    if isinstance(opt, str):  # its variables' scope is its name, which Keras numbers per process (sgd, sgd_1, ...)
        made = keras.optimizers.get(opt)
        opt = type(made).from_config({**made.get_config(), "name": re.sub(r"_\d+$", "", made.name)})
    variables = model.trainable_variables
    if not getattr(opt, "built", False):
        opt.build(variables)
    phases: dict[str, str] = {}

    def step(inputs: list[Any], labels: list[Any]) -> Any:
        with tf.GradientTape() as tape:
            preds = keras.tree.flatten(model(_packed(model, inputs), training=True))
            terms = [_batch_mean(tf, fn(y, p)) * w if w != 1.0 else _batch_mean(tf, fn(y, p))
                     for fn, y, p, w in zip(loss_fns, labels, preds, weights, strict=True)]
            terms += [tf.reduce_sum(tf.cast(extra, terms[0].dtype)) for extra in model.losses]  # regularisers
            total = tf.add_n(terms)
            scaled = opt.scale_loss(total) if hasattr(opt, "scale_loss") else total
        phases.clear()  # of this trace only
        gradients = _made(tf, phases, "backward", lambda: tape.gradient(scaled, variables))
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in gradients]  # Keras's sparse updates use tf.cond
        _made(tf, phases, "update", lambda: opt.apply_gradients(zip(grads, variables, strict=True)))
        return total

    concrete = tf.function(step, input_signature=[specs, targets], autograph=False).get_concrete_function()
    return concrete, opt, dict(phases)


def _made(tf: Any, phases: dict[str, str], phase: str, fn: Any) -> Any:
    """``fn()``, with ``phases[name] = phase`` for each op it adds to the graph being traced."""
    graph = tf.compat.v1.get_default_graph()
    before = len(graph.get_operations())
    out = fn()
    phases.update((op.name, phase) for op in graph.get_operations()[before:])
    return out


def _batch_mean(tf: Any, loss: Any) -> Any:
    """A per-sample loss averaged over the batch (Keras's default reduction); a scalar one as it is."""
    return loss if loss.shape.rank == 0 else tf.reduce_mean(loss)


def _output_names(model: Any) -> list[str]:
    """A Keras model's output names, in ``model.outputs`` order (its outputs' tensor names where it has none)."""
    return list(getattr(model, "output_names", None) or [t.name for t in model.outputs])


def _loss_weights(model: Any) -> list[float]:
    """The compiled ``loss_weights`` per output of ``model`` (in ``model.outputs`` order; 1.0 where none)."""
    config = model.get_compile_config() if getattr(model, "compiled", False) else None
    given = (config or {}).get("loss_weights")
    names = _output_names(model)
    if given is None:
        return [1.0] * len(names)
    if isinstance(given, dict):
        return [float(given.get(n, 1.0)) for n in names]
    if isinstance(given, list | tuple):
        if len(given) != len(names):
            raise UnsupportedGraphError(f"Keras model {model.name!r}: {len(given)} loss weights for "
                                        f"{len(names)} outputs")
        return [float(w) for w in given]
    return [float(given)] * len(names)


def _output_losses(keras: Any, model: Any, loss: Any) -> list[Any]:
    """One loss function per output of ``model`` (in ``model.outputs`` order) from ``loss`` or the compiled
    loss: one for all, a list (one per output) or a dict (by output name); each is averaged over the batch in
    the step, as Keras's default reduction does."""
    given = loss if loss is not None else getattr(model, "loss", None) or "mean_squared_error"
    names = _output_names(model)
    if isinstance(given, dict):
        missing = [n for n in names if n not in given]
        if missing:
            raise UnsupportedGraphError(f"Keras model {model.name!r}: the loss names outputs {sorted(given)}, "
                                        f"not {missing} (of its outputs {names})")
        given = [given[n] for n in names]
    if isinstance(given, list | tuple):
        if len(given) != len(model.outputs):
            raise UnsupportedGraphError(f"Keras model {model.name!r}: {len(given)} losses for "
                                        f"{len(model.outputs)} outputs")
        return [keras.losses.get(g) for g in given]
    return [keras.losses.get(given)] * len(model.outputs)
