"""Training a placement policy: REINFORCE and PPO losses, baseline, checkpoints and the trainer loops."""

from gplace.training._loop import NothingFitError
from gplace.training.baseline import EMABaseline
from gplace.training.multigraph import MultiGraphResult, MultiGraphTrainer, finetune
from gplace.training.ppo import PPOTrainer, ppo_loss
from gplace.training.reinforce import reinforce_loss, step_time_reward
from gplace.training.settings import LoopSettings, MultiGraphSettings, PPOSettings, SearchSettings
from gplace.training.trainer import ReinforceTrainer, TrainResult

__all__ = [
    "EMABaseline", "LoopSettings", "MultiGraphResult", "MultiGraphSettings", "MultiGraphTrainer", "NothingFitError",
    "PPOSettings", "PPOTrainer", "ReinforceTrainer", "SearchSettings", "TrainResult", "finetune", "ppo_loss",
    "reinforce_loss", "step_time_reward",
]
