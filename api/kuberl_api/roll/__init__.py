"""ROLL (alibaba/ROLL) pipeline configs, translated into kuberl's verl ``backend_config``."""

from kuberl_api.roll.models import RollConfig
from kuberl_api.roll.translate import RollTranslation, looks_like_roll, translate_roll_config

__all__ = ["RollConfig", "RollTranslation", "looks_like_roll", "translate_roll_config"]
