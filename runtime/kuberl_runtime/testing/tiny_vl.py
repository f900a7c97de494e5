"""A tiny random-init Qwen2.5-VL and its processor, built locally — for CPU tests and the VL demo.

The tokenizer is the repo's arithmetic tokenizer (examples/tokenizer/arith-tokenizer) with
Qwen2-VL's vision tokens added; the chat template renders `{"type": "image"}` content parts as
`<|vision_start|><|image_pad|><|vision_end|>` like Qwen2.5-VL's. The image processor is
Qwen2-VL's with small pixel bounds, so a 56×56 image is a 4×4 patch grid: 4 vision tokens.
Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoTokenizer,
    GenerationConfig,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2VLImageProcessor,
    Qwen2VLVideoProcessor,
)

REPO = Path(__file__).resolve().parents[3]
ARITH_TOKENIZER = REPO / "examples" / "tokenizer" / "arith-tokenizer"
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
PATCH = 14
MERGE = 2

VL_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif part['type'] == 'video' %}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_tiny_vl_processor(tokenizer_dir: str | Path = ARITH_TOKENIZER) -> Qwen2_5_VLProcessor:
    """The arithmetic tokenizer plus vision tokens, and a Qwen2-VL image processor (≤ 112² px)."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.add_special_tokens({"additional_special_tokens": list(VISION_TOKENS)})
    tokenizer.chat_template = VL_CHAT_TEMPLATE
    sizes = {
        "patch_size": PATCH,
        "merge_size": MERGE,
        "temporal_patch_size": 2,
        "min_pixels": (PATCH * MERGE) ** 2,
        "max_pixels": (4 * PATCH * MERGE) ** 2,
    }
    return Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(**sizes),
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(**sizes),
        chat_template=VL_CHAT_TEMPLATE,
    )


def build_tiny_vl_config(
    tokenizer: Any,
    *,
    num_layers: int = 2,
    hidden: int = 64,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    vision_hidden: int = 32,
    vision_depth: int = 2,
) -> Qwen2_5_VLConfig:
    head_dim = hidden // num_heads
    # mrope splits each head's rotary half (head_dim / 2) into temporal, height and width parts.
    t_part = head_dim // 2 - 2 * (head_dim // 2 // 3)
    section = [t_part, head_dim // 2 // 3, head_dim // 2 // 3]
    ids = tokenizer.convert_tokens_to_ids(list(VISION_TOKENS))
    return Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": hidden,
            "intermediate_size": 4 * hidden,
            "num_hidden_layers": num_layers,
            "num_attention_heads": num_heads,
            "num_key_value_heads": num_kv_heads,
            "max_position_embeddings": 1024,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": section,
            },
            "pad_token_id": tokenizer.pad_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "bos_token_id": tokenizer.eos_token_id,
        },
        vision_config={
            "depth": vision_depth,
            "hidden_size": vision_hidden,
            "intermediate_size": 2 * vision_hidden,
            "num_heads": 2,
            "patch_size": PATCH,
            "spatial_merge_size": MERGE,
            "temporal_patch_size": 2,
            "window_size": 2 * PATCH * MERGE,
            "out_hidden_size": hidden,
            "fullatt_block_indexes": [vision_depth - 1],
        },
        vision_start_token_id=ids[0],
        vision_end_token_id=ids[1],
        image_token_id=ids[2],
        video_token_id=ids[3],
        tie_word_embeddings=True,
    )


def build_tiny_vl(processor: Any, *, seed: int = 0, **config_kwargs: Any) -> Any:
    """A random-init `Qwen2_5_VLForConditionalGeneration`; same seed and sizes, same weights."""
    tokenizer = processor.tokenizer
    config = build_tiny_vl_config(tokenizer, **config_kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    return model.eval()


def save_tiny_vl(out_dir: str | Path, *, seed: int = 0, **config_kwargs: Any) -> Path:
    """A model directory (config, weights, tokenizer, processor) loadable by `AutoProcessor` and
    `AutoModelForImageTextToText`."""
    out = Path(out_dir)
    processor = build_tiny_vl_processor()
    build_tiny_vl(processor, seed=seed, **config_kwargs).save_pretrained(out)
    processor.save_pretrained(out)
    return out
