"""What every policy returns, masked-categorical helpers, and the base of policies that place groups independently.

A policy maps encoder states ``(G, S)`` and an allowed-device mask ``(G, D)`` to placements. Policies whose
device choices are independent given the states (:class:`~gplace.policies.MLPPolicy`,
:class:`~gplace.policies.GDPPolicy`, :class:`~gplace.policies.DeviceAwarePolicy`) subclass
:class:`IndependentPolicy` and implement only ``_logits``: one pass gives every group's logits, and sampling,
greedy decoding, log-probabilities and entropies follow from them here.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import NamedTuple

import torch
from torch import nn

from gplace.configurable import Configurable
from gplace.interfaces import PolicyCapabilities
from gplace.ir.errors import InvalidPlacementError, check_sizes


class PolicyOutput(NamedTuple):
    """K decoded device sequences with their log-probabilities and entropies under the policy."""

    devices: torch.Tensor
    """(K, G) int64 device index per group, in the encoder's order."""
    log_prob: torch.Tensor
    """(K,) log-probability of each sequence (with gradient)."""
    entropy: torch.Tensor
    """(K,) sum over steps of the entropy of each step's device distribution (with gradient)."""


def check_num_samples(num_samples: object) -> None:
    """Refuse a number of placements to sample that is not a whole number >= 1 (numpy integers included).

    Raises:
        ValueError: naming the value.
    """
    if isinstance(num_samples, bool) or not isinstance(num_samples, Integral) or num_samples < 1:
        raise ValueError(f"num_samples must be a whole number >= 1, got {num_samples!r}")


def parameter_dtype(module: object) -> torch.dtype | None:
    """The dtype of the module's first floating-point parameter, ``None`` for one without any."""
    parameters = module.parameters() if hasattr(module, "parameters") else ()  # an encoder need not be a Module
    return next((p.dtype for p in parameters if p.is_floating_point()), None)


def check_inputs(states: torch.Tensor, allowed: torch.Tensor, num_devices: int, state_size: int,
                 policy: nn.Module | None = None) -> None:
    """Raise ``ValueError`` unless states are (G, state_size), of ``policy``'s weights' dtype where given (outside
    autocast, which runs the layers in its own dtype), and ``allowed`` a (G, D) bool mask with a device per row.

    Shapes:
        states (G, S), allowed (G, D) bool.
    """
    g = states.shape[0]
    if states.ndim != 2 or states.shape[1] != state_size:
        raise ValueError(f"states has shape {tuple(states.shape)}, expected (G, {state_size})")
    weights = parameter_dtype(policy) if policy is not None else None
    if weights is not None and states.dtype != weights and not torch.is_autocast_enabled(states.device.type):
        raise ValueError(f"states are {states.dtype}, {type(policy).__name__}'s weights {weights}: convert the "
                         f"states (states.to({weights})) or the policy (policy.to({states.dtype}))")
    if allowed.shape != (g, num_devices) or allowed.dtype != torch.bool:
        raise ValueError(f"allowed must be a ({g}, {num_devices}) bool tensor, got {tuple(allowed.shape)} "
                         f"{allowed.dtype}")
    if g and not allowed.any(1).all():
        raise ValueError(f"group at position {int((~allowed.any(1)).nonzero()[0])} has no allowed device")


def check_devices(devices: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``devices`` as int64 after checking it is (K, G), in range and allowed.

    Raises:
        ValueError: ``devices`` is not (K, G).
        InvalidPlacementError: (a ValueError) ``devices`` is not of an integer dtype (floats were truncated to
            devices), or an entry is out of range or not allowed; names its row, group position and device.

    Shapes:
        devices (K, G) int, allowed (G, D) bool; returns (K, G) int64.
    """
    g, d = allowed.shape
    given = torch.as_tensor(devices, device=allowed.device)
    if given.numel() and (given.is_floating_point() or given.is_complex() or given.dtype == torch.bool):
        raise InvalidPlacementError(f"devices must be integer device indices, got dtype {given.dtype}")
    devices = given.to(torch.int64)
    if devices.ndim != 2 or devices.shape[1] != g:
        raise ValueError(f"devices has shape {tuple(devices.shape)}, expected (K, {g})")
    outside = (devices < 0) | (devices >= d)
    if outside.any():
        k, i = outside.nonzero()[0].tolist()
        raise InvalidPlacementError(f"devices row {k} puts the group at position {i} on device "
                                    f"{int(devices[k, i])}; devices lie in [0, {d})")
    barred = ~allowed[torch.arange(g, device=devices.device), devices]
    if barred.any():
        k, i = barred.nonzero()[0].tolist()
        raise InvalidPlacementError(f"devices row {k} puts the group at position {i} on device "
                                    f"{int(devices[k, i])}, which it is not allowed on (allowed: "
                                    f"{allowed[i].nonzero().flatten().tolist()})")
    return devices


def masked_log_softmax(logits: torch.Tensor, allowed: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probabilities of ``softmax(logits / temperature)`` with barred devices at ``-inf``.

    The scaled logits are kept finite (:func:`temper`), and barred devices are ``-inf`` even where the logits
    are NaN, so an argmax or Gumbel-max draw never picks one.

    Shapes:
        logits (..., G, D), allowed (G, D) bool; returns (..., G, D).
    """
    barred = ~allowed
    log_p = torch.log_softmax(temper(logits, allowed, temperature).masked_fill(barred, float("-inf")), -1)
    return log_p.masked_fill(barred, float("-inf"))  # NaN logits made the whole row NaN


def temper(logits: torch.Tensor, allowed: torch.Tensor, temperature: float) -> torch.Tensor:
    """``logits / temperature``, exactly, at temperatures >= 1 (dividing cannot overflow a finite logit) and in
    every row whose allowed entries stay within a quarter of the dtype's range; other rows (a temperature too small
    for the dtype) get ``(logits - top) / temperature`` clamped to it, ``top`` the row's largest allowed logit, so
    the best device keeps 0 and the softmax is finite and one-hot.

    A temperature below the smallest normal number of the dtype the division runs in (``torch.finfo(dtype).tiny``,
    1.2e-38 for float32, which float16 and bfloat16 divide in) divides as that one, since it could round to 0
    (0 / 0 = NaN).

    Shapes:
        logits (..., G, D), allowed (G, D) bool; returns (..., G, D).
    """
    if temperature >= 1.0:  # the usual case, on every policy call: one division
        return logits / temperature
    floor = torch.finfo(torch.promote_types(logits.dtype, torch.float32)).tiny  # torch divides halves in float32
    temperature, bound = max(temperature, floor), torch.finfo(logits.dtype).max / 4
    scaled = logits / temperature
    in_range = ((scaled.abs() <= bound) | ~allowed).all(-1, keepdim=True)
    top = logits.masked_fill(~allowed, float("-inf")).amax(-1, keepdim=True)
    return torch.where(in_range, scaled, ((logits - top) / temperature).clamp(-bound, bound))


def gumbel_argmax(log_p: torch.Tensor, num_samples: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``num_samples`` independent draws per row of ``exp(log_p)`` (Gumbel-max; ``-inf`` is never drawn).

    The uniform noise is drawn on ``generator``'s device (a CPU generator for a policy on a GPU, say) and then
    moved to ``log_p``'s, so one generator gives the same draws wherever the policy runs.

    Shapes:
        log_p (G, D); returns (K, G) int64.
    """
    return (log_p.detach() + gumbel_noise((num_samples, *log_p.shape), log_p, generator)).argmax(-1)


def gumbel_noise(shape: tuple[int, ...], like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Standard Gumbel noise of ``shape``, drawn on ``generator``'s device and returned on ``like``'s, in its dtype."""
    noise_device = like.device if generator is None else generator.device
    u = torch.rand(shape, generator=generator, device=noise_device, dtype=like.dtype).to(like.device)
    return -torch.log(-torch.log(u.clamp_min(1e-20)))


def score(log_p: torch.Tensor, devices: torch.Tensor, allowed: torch.Tensor) -> PolicyOutput:
    """Log-probabilities and entropies of ``devices``, summed over groups.

    ``log_p`` may be shared by all K samples (independent policies) or be one per sample (autoregressive ones).

    Shapes:
        log_p (G, D) or (K, G, D), devices (K, G), allowed (G, D); returns a :class:`PolicyOutput` with (K,) terms.
    """
    k = devices.shape[0]
    log_p = log_p.expand(k, *allowed.shape)
    log_prob = log_p.gather(-1, devices.unsqueeze(-1)).squeeze(-1).sum(1)
    safe = log_p.masked_fill(~allowed, 0.0)
    entropy = -(safe.exp() * safe).sum((1, 2))
    return PolicyOutput(devices, log_prob, entropy)


class Tempered:
    """A policy's sampling temperature, checked when set (0 gave NaN log-probabilities and sampled barred devices).

    A temperature too small for the policy's dtype (e.g. 1e-39 in float32) gives the greedy, one-hot distribution
    (see :func:`temper`).
    """

    _temperature: float = 1.0

    @property
    def temperature(self) -> float:
        """Logits are divided by this before the softmax: finite and > 0 (default: 1.0)."""
        return self._temperature

    @temperature.setter
    def temperature(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value < math.inf:
            raise ValueError(f"temperature must be a finite number > 0, got {value!r}")
        self._temperature = float(value)


class IndependentPolicy(Tempered, Configurable, nn.Module):
    """Base of policies that choose every group's device independently given the states, in one pass.

    The public methods check their inputs and apply temperature and mask; subclasses implement
    ``_logits(states, device_features) -> (G, D)``. A subclass with a fixed device count sets
    ``num_devices``; one that sets ``uses_device_features = True`` reads D from ``device_features`` instead.

    Args:
        state_size: size S of the encoder states.
        num_devices: number of devices D, or ``None`` when D comes from ``device_features``.

    Shapes:
        states (G, S) float, allowed (G, D) bool, device_features (D, F); devices (K, G) int64; log_prob and
        entropy (K,).
    """

    uses_device_features: bool = False
    """Whether the logits depend on per-device features passed as ``device_features``."""

    def __init__(self, state_size: int, num_devices: int | None) -> None:
        super().__init__()
        check_sizes(type(self).__name__, state_size=state_size,
                    **({} if num_devices is None else {"num_devices": num_devices}))
        self.state_size, self._num_devices = state_size, num_devices

    @property
    def capabilities(self) -> PolicyCapabilities:
        """A fixed device count, or any cluster when the logits read ``device_features``."""
        return PolicyCapabilities(num_devices=None if self.uses_device_features else self._num_devices,
                                  uses_device_features=self.uses_device_features)

    # ------------------------------------------------------------------ public entry points
    def sample(self, states: torch.Tensor, allowed: torch.Tensor, num_samples: int,
               generator: torch.Generator | None = None, *, device_features: torch.Tensor | None = None
               ) -> PolicyOutput:
        """Sample ``num_samples`` placements of the G groups.

        Shapes:
            states (G, S), allowed (G, D) bool; returns devices (K, G), log_prob (K,), entropy (K,).
        """
        check_num_samples(num_samples)
        log_p = self.log_probs(states, allowed, device_features=device_features)
        return score(log_p, gumbel_argmax(log_p, num_samples, generator), allowed)

    def greedy(self, states: torch.Tensor, allowed: torch.Tensor, *, device_features: torch.Tensor | None = None
               ) -> torch.Tensor:
        """The most likely device of every group.

        Shapes:
            states (G, S), allowed (G, D) bool; returns (G,) int64.
        """
        with torch.no_grad():
            return self.log_probs(states, allowed, device_features=device_features).argmax(-1)

    def evaluate(self, states: torch.Tensor, allowed: torch.Tensor, devices: torch.Tensor, *,
                 device_features: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability and entropy of given placements.

        Raises:
            ValueError: a placement has the wrong length, or uses a device out of range or not allowed.

        Shapes:
            states (G, S), allowed (G, D) bool, devices (K, G) int; returns log_prob (K,), entropy (K,).
        """
        log_p = self.log_probs(states, allowed, device_features=device_features)
        out = score(log_p, check_devices(devices, allowed), allowed)
        return out.log_prob, out.entropy

    def log_probs(self, states: torch.Tensor, allowed: torch.Tensor, *, device_features: torch.Tensor | None = None
                  ) -> torch.Tensor:
        """Every group's masked, tempered device log-probabilities.

        Raises:
            ContractError: (a ValueError) ``_logits`` did not return a (G, D) tensor.

        Shapes:
            states (G, S), allowed (G, D) bool, device_features (D, F); returns (G, D).
        """
        num_devices = self._check_device_features(device_features)
        check_inputs(states, allowed, allowed.shape[-1] if num_devices is None else num_devices, self.state_size, self)
        logits = self._logits(states, device_features)
        if not isinstance(logits, torch.Tensor) or logits.shape != allowed.shape:  # else broadcast in silence
            from gplace.placer import ContractError  # gplace.placer imports the policies

            g, d = allowed.shape
            got = f"shape {tuple(logits.shape)}" if isinstance(logits, torch.Tensor) else f"a {type(logits).__name__}"
            raise ContractError(f"policy {type(self).__name__}'s _logits must return (G={g}, D={d}) logits, one row "
                                f"per group, got {got}")
        return masked_log_softmax(logits, allowed, self.temperature)

    # ------------------------------------------------------------------ hooks
    def _logits(self, states: torch.Tensor, device_features: torch.Tensor | None) -> torch.Tensor:
        """Unmasked logits. Shapes: states (G, S), device_features (D, F) or ``None``; returns (G, D)."""
        raise NotImplementedError

    def _check_device_features(self, device_features: torch.Tensor | None) -> int | None:
        """The device count D the inputs must have, checking ``device_features`` where the policy reads them."""
        if not self.uses_device_features:
            return self._num_devices
        if device_features is None or device_features.ndim != 2:
            raise ValueError(f"{type(self).__name__} needs device_features as a (D, F) tensor")
        return int(device_features.shape[0])
