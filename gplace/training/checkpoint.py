"""Atomic checkpoints of a training run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` with ``torch.save`` to a temp file, then rename, so a kill never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def load_checkpoint(path: str | Path, fingerprint: str) -> dict[str, Any] | None:
    """The checkpoint at ``path`` if it exists and belongs to the graph ``fingerprint``, else ``None``.

    Its tensors are read onto the CPU; ``load_state_dict`` of a module or optimizer moves each to where that
    module's parameters are, so a run checkpointed on a GPU resumes on a machine without one, and back.

    Raises:
        ValueError: the checkpoint is for another graph or cluster (resuming would mix runs).
    """
    path = Path(path)
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("fingerprint") != fingerprint:
        raise ValueError(
            f"checkpoint {path} belongs to another graph/cluster ({state.get('fingerprint')}, not {fingerprint}); "
            "use a new run directory or delete it"
        )
    log.info("resuming from %s at update %d", path, state["update"])
    return state
