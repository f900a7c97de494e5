"""The tokenizer a run renders prompts with: `data.tokenizer`, and verl's template override.

`actor_rollout_ref.model.custom_chat_template` replaces the tokenizer's own chat template (verl
sets `tokenizer.chat_template`), so every prompt the rollout generates from and the actor trains
on is rendered with it.
"""

from __future__ import annotations

import logging
from typing import Any

from transformers import AutoConfig, AutoProcessor, AutoTokenizer

logger = logging.getLogger(__name__)


def load_tokenizer(path: str, *, trust_remote_code: bool, custom_chat_template: str = "") -> Any:
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    if custom_chat_template:
        logger.info("rendering prompts with actor_rollout_ref.model.custom_chat_template")
        tokenizer.chat_template = custom_chat_template
    return tokenizer


def load_processor(
    path: str, *, trust_remote_code: bool, tokenizer: Any, custom_chat_template: str = ""
) -> Any:
    """The model's multimodal processor (`AutoProcessor`), or None for a text-only model.

    Only a config with a vision encoder (`vision_config`) has one worth loading; its tokenizer is
    the run's (`data.tokenizer`), and `custom_chat_template` replaces its template as well.
    """
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    if getattr(config, "vision_config", None) is None:
        return None
    processor = AutoProcessor.from_pretrained(path, trust_remote_code=trust_remote_code)
    if getattr(processor, "image_processor", None) is None:
        return None
    processor.tokenizer = tokenizer
    if custom_chat_template:
        processor.chat_template = custom_chat_template
    return processor
