"""The exponential moving-average reward baseline."""

from __future__ import annotations

from collections.abc import Sequence

from gplace.ir.errors import check_finite


class EMABaseline:
    """``b <- decay * b + (1 - decay) * mean(rewards)``, started at the first batch's mean.

    Rewards of failed placements are left out by the caller.
    """

    def __init__(self, decay: float = 0.9) -> None:
        check_finite("EMABaseline", decay=decay)
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"baseline decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.value: float | None = None

    def __call__(self, fallback: float) -> float:
        """The current baseline, or ``fallback`` before the first update."""
        return fallback if self.value is None else self.value

    def update(self, rewards: Sequence[float]) -> None:
        """Fold in the mean of ``rewards``; no-op when empty."""
        if len(rewards) == 0:
            return
        mean = float(sum(rewards) / len(rewards))
        self.value = mean if self.value is None else self.decay * self.value + (1 - self.decay) * mean

    def state_dict(self) -> dict[str, float | None]:
        """State for a checkpoint."""
        return {"decay": self.decay, "value": self.value}

    def load_state_dict(self, state: dict[str, float | None]) -> None:
        """Restore the value from :meth:`state_dict`; the decay is this baseline's setting (a resumed run may change
        it), not state."""
        self.value = state["value"]
