"""A placer that scores (group, device) pairs from device features, so one policy serves any cluster (after GiPH)."""

from __future__ import annotations

import torch
from torch import nn

from gplace.features import DEVICE_FEATURES
from gplace.ir.errors import check_sizes
from gplace.policies.base import IndependentPolicy


class DeviceAwarePolicy(IndependentPolicy):
    """Scores every (group state, device features) pair with an MLP; devices are described, not numbered.

    Each device is embedded from its features (see :func:`gplace.features.device_features`) next to the
    same features minus their mean over the cluster, so it is judged against the devices beside it, and its rank
    among the devices with the same features (:func:`twin_rank`: 0 for the first, 1 for the last), without which
    equal devices got equal logits for every group whatever the weights, so on a cluster of equal GPUs the policy
    could never learn to use more than one of them. A group's logit for a device is
    ``pair(relu(node(s_g) + dev(f_d)))``, with ``node``, ``dev`` and ``pair`` small MLPs. Nothing depends on the
    number of the devices, and on their order only among equal ones (permuting devices of different features
    permutes the logits); the same weights place on clusters of any size. Groups are placed independently, in one
    pass; logits are divided by :attr:`temperature` and barred devices get probability zero.

    Args:
        hidden_size: width of the node, device and pair embeddings (default: 128).
        state_size: size S of the encoder states (default: ``hidden_size``).
        device_feature_size: width F of the device features (default: ``DEVICE_FEATURES``, 6).
        num_devices: accepted so a factory called as ``policy(num_devices=D)`` works, and otherwise unused; the
            device count is that of ``device_features`` (default: ``None``).

    Shapes:
        states (G, S) float, allowed (G, D) bool, device_features (D, F) float; devices (K, G) int64;
        log_prob and entropy (K,).
    """

    uses_device_features = True
    """The logits depend on ``device_features``; callers (:class:`~gplace.placer.PolicyPlacer`) pass them."""

    def __init__(self, hidden_size: int = 128, *, state_size: int | None = None,
                 device_feature_size: int = DEVICE_FEATURES, num_devices: int | None = None) -> None:
        check_sizes("DeviceAwarePolicy", hidden_size=hidden_size, device_feature_size=device_feature_size)
        super().__init__(hidden_size if state_size is None else state_size, None)
        self.device_feature_size = device_feature_size
        self.node = two_layer_mlp(self.state_size, hidden_size)
        self.device = two_layer_mlp(2 * device_feature_size + 1, hidden_size)
        self.pair = nn.Sequential(nn.ReLU(), nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                                  nn.Linear(hidden_size, 1, bias=False))  # a shared bias cancels in the softmax

    def _logits(self, states: torch.Tensor, device_features: torch.Tensor | None) -> torch.Tensor:
        """Logits per (group, device). Shapes: states (G, S), device_features (D, F); returns (G, D)."""
        if device_features is None or device_features.shape[1] != self.device_feature_size:
            width = None if device_features is None else device_features.shape[1]
            raise ValueError(f"device_features has width {width}, policy expects {self.device_feature_size}")
        features = device_features.to(states.dtype)
        dev = self.device(torch.cat([relative_device_features(features), twin_rank(features)[:, None]], 1))
        return self.pair(self.node(states).unsqueeze(1) + dev.unsqueeze(0)).squeeze(-1)


def relative_device_features(f: torch.Tensor) -> torch.Tensor:
    """Device features next to their deviation from the cluster mean. Shapes: (D, F) -> (D, 2F)."""
    return torch.cat([f, f - f.mean(0, keepdim=True)], 1)


def twin_rank(f: torch.Tensor) -> torch.Tensor:
    """Each device's rank among the devices with the same features (equal to 0.1 %, as measured speeds of one model
    of GPU are), from 0 (the first) to 1 (the last); 0 for a device with none. Shapes: (D, F) -> (D,)."""
    same = torch.isclose(f[:, None, :], f[None, :, :], rtol=1e-3, atol=1e-6).all(-1)  # (D, D)
    earlier = torch.tril(same, diagonal=-1).sum(1)
    return (earlier / (same.sum(1) - 1).clamp(min=1)).to(f.dtype)


def two_layer_mlp(width_in: int, width: int) -> nn.Sequential:
    """``Linear -> ReLU -> Linear``, ``width_in`` to ``width``."""
    return nn.Sequential(nn.Linear(width_in, width), nn.ReLU(), nn.Linear(width, width))
