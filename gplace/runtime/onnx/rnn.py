"""ONNX recurrent layers (``LSTM``, ``GRU``, ``RNN``) as torch functions, converted as in ``onnx_ops``.

- Directions ``forward``, ``reverse`` and ``bidirectional``; ``layout`` 0 (``[seq, batch, ...]``) and 1
  (batch first); optional biases, initial states and LSTM peepholes; ``clip`` bounds every gate's input;
  GRU's ``linear_before_reset``. Gate orders are ONNX's: LSTM ``i, o, f, c``, GRU ``z, r, h``.
- Activations ``Sigmoid``, ``Tanh`` and ``Relu`` (per direction); others, ``activation_alpha`` / ``_beta`` and
  LSTM's ``input_forget`` are unsupported. ``sequence_lens`` must equal the sequence length (checked when the op
  runs: shorter sequences raise).
- The input projection of all steps is one matrix product; the recurrence runs step by step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gplace.runtime.onnx.ops import Attrs, Converter, host_list, outputs, reads_on_host

__all__ = ["CONVERTERS"]

_ACTIVATIONS = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu}


def _check_lengths(sequence_lens: Any, steps: int) -> None:
    if sequence_lens is not None and any(n != steps for n in host_list(sequence_lens)):
        raise ValueError("sequence_lens shorter than the sequence are not supported")


def _recurrent(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor, b: torch.Tensor | None,
               sequence_lens: torch.Tensor | None, states: list[torch.Tensor | None], cell: Callable[..., Any],
               o: dict[str, Any]) -> Any:
    """Run ``cell`` over the sequence in each direction; returns ``(Y, final state per kind...)``."""
    if o["layout"]:
        x, states = x.transpose(0, 1), [None if s is None else s.transpose(0, 1) for s in states]
    _check_lengths(sequence_lens, x.shape[0])
    hidden, ys, finals = r.shape[-1], [], []
    for d in range(w.shape[0]):
        reverse = o["direction"] == "reverse" or d == 1
        bias_x, bias_h = b[d].chunk(2) if b is not None else (0, 0)
        gates_x = x @ w[d].T + bias_x
        state = [torch.zeros(x.shape[1], hidden, dtype=x.dtype, device=x.device) if s is None else s[d]
                 for s in states]
        acts = [_ACTIVATIONS[f] for f in o["activations"][d * o["per_direction"]:(d + 1) * o["per_direction"]]]
        y: list[Any] = [None] * x.shape[0]
        for t in (reversed(range(x.shape[0])) if reverse else range(x.shape[0])):
            state = cell(gates_x[t], state, r[d], bias_h, acts, d, o)
            y[t] = state[0]
        ys.append(torch.stack(y))
        finals.append(state)
    y_all = torch.stack(ys, 1)
    kinds = [torch.stack([f[k] for f in finals]) for k in range(len(states))]
    if o["layout"]:
        y_all, kinds = y_all.permute(2, 0, 1, 3), [k.transpose(0, 1) for k in kinds]
    return outputs((y_all, *kinds), o["outputs"])


def _clip(g: torch.Tensor, o: dict[str, Any]) -> torch.Tensor:
    return g if o["clip"] is None else g.clamp(-o["clip"], o["clip"])


def _lstm_cell(gx: torch.Tensor, state: list[torch.Tensor], r: torch.Tensor, bias: Any, acts: list[Any], d: int,
               o: dict[str, Any]) -> list[torch.Tensor]:
    """Gates in ONNX order i, o, f, c; peepholes ``P = [Pi, Po, Pf]``."""
    h, c = state
    i, og, f, cc = (gx + h @ r.T + bias).chunk(4, -1)
    p = o["peepholes"]
    if p is not None:
        pi, po, pf = p[d].chunk(3)
        i, f = i + pi * c, f + pf * c
    act_f, act_g, act_h = acts
    c = act_f(_clip(f, o)) * c + act_f(_clip(i, o)) * act_g(_clip(cc, o))
    og = og + po * c if p is not None else og
    return [act_f(_clip(og, o)) * act_h(c), c]


def _gru_cell(gx: torch.Tensor, state: list[torch.Tensor], r: torch.Tensor, bias: Any, acts: list[Any], d: int,
              o: dict[str, Any]) -> list[torch.Tensor]:
    """Gates in ONNX order z, r, h."""
    (h,) = state
    xz, xr, xh = gx.chunk(3, -1)
    rz, rr, rh = r.chunk(3, 0)
    bz, br, bh = bias.chunk(3) if isinstance(bias, torch.Tensor) else (0, 0, 0)
    act_f, act_g = acts
    z = act_f(_clip(xz + h @ rz.T + bz, o))
    reset = act_f(_clip(xr + h @ rr.T + br, o))
    if o["linear_before_reset"]:
        candidate = act_g(_clip(xh + reset * (h @ rh.T + bh), o))
    else:
        candidate = act_g(_clip(xh + (reset * h) @ rh.T + bh, o))
    return [(1 - z) * candidate + z * h]


def _rnn_cell(gx: torch.Tensor, state: list[torch.Tensor], r: torch.Tensor, bias: Any, acts: list[Any], d: int,
              o: dict[str, Any]) -> list[torch.Tensor]:
    (h,) = state
    return [acts[0](_clip(gx + h @ r.T + bias, o))]


@reads_on_host("sequence_lens")
def _lstm(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor, b: Any = None, sequence_lens: Any = None,
          initial_h: Any = None, initial_c: Any = None, p: Any = None, *, options: dict[str, Any]) -> Any:
    return _recurrent(x, w, r, b, sequence_lens, [initial_h, initial_c], _lstm_cell, {**options, "peepholes": p})


@reads_on_host("sequence_lens")
def _gru(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor, b: Any = None, sequence_lens: Any = None,
         initial_h: Any = None, *, options: dict[str, Any]) -> Any:
    return _recurrent(x, w, r, b, sequence_lens, [initial_h], _gru_cell, options)


@reads_on_host("sequence_lens")
def _rnn(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor, b: Any = None, sequence_lens: Any = None,
         initial_h: Any = None, *, options: dict[str, Any]) -> Any:
    return _recurrent(x, w, r, b, sequence_lens, [initial_h], _rnn_cell, options)


_RECURRENT = {"LSTM": (_lstm, ["sigmoid", "tanh", "tanh"]), "GRU": (_gru, ["sigmoid", "tanh"]),
              "RNN": (_rnn, ["tanh"])}


def _recurrent_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    fn, default = _RECURRENT[a.node.op_type]
    direction = a.choice("direction", "forward", ("forward", "reverse", "bidirectional"))
    activations = [f.lower() for f in a.get("activations") or default * (2 if direction == "bidirectional" else 1)]
    unknown = [f for f in activations if f not in _ACTIVATIONS]
    if unknown or a.get("activation_alpha") or a.get("activation_beta"):
        raise a.error(f"activations {unknown or activations} are not supported (supported: Sigmoid, Tanh, Relu)")
    if a.get("input_forget", 0):
        raise a.error("attribute input_forget=1 is not supported")
    a.get("hidden_size")
    options = {"direction": direction, "layout": a.get("layout", 0), "clip": a.get("clip"),
               "activations": activations, "per_direction": len(default), "outputs": a.num_outputs,
               "linear_before_reset": a.get("linear_before_reset", 0)}
    return fn, {"options": options}


CONVERTERS: dict[str, Converter] = {"LSTM": _recurrent_convert, "GRU": _recurrent_convert, "RNN": _recurrent_convert}
"""ONNX op type (default domain) -> converter for the recurrent layers."""
