"""Training a placement policy: REINFORCE loss, baseline, checkpoints and the trainer loop."""

from gplace.training.baseline import EMABaseline
from gplace.training.reinforce import reinforce_loss, step_time_reward
from gplace.training.trainer import ReinforceTrainer, TrainResult

__all__ = ["EMABaseline", "ReinforceTrainer", "TrainResult", "reinforce_loss", "step_time_reward"]
