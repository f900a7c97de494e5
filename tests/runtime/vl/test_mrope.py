"""mrope positions equal transformers' own `get_rope_index` (the oracle), padded rows included."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from kuberl_runtime.engine.mrope import MRopeSpec, batch_mrope_positions, mrope_positions


def _inputs(processor, sizes, question="How many dots?"):
    images = [Image.fromarray(np.full((h, w, 3), 90, np.uint8)) for h, w in sizes]
    parts = [{"type": "image"} for _ in images] + [{"type": "text", "text": question}]
    text = processor.apply_chat_template(
        [{"role": "user", "content": parts}], add_generation_prompt=True, tokenize=False
    )
    return processor(text=[text], images=images, return_tensors="pt")


def test_one_sequence_matches_transformers(processor, vl_model):
    spec = MRopeSpec.of(vl_model.config)
    inputs = _inputs(processor, [(56, 84), (112, 56)])  # 4x6 and 8x4 patch grids
    expected, _ = vl_model.model.get_rope_index(
        inputs["input_ids"],
        inputs["mm_token_type_ids"],
        image_grid_thw=inputs["image_grid_thw"],
        attention_mask=inputs["attention_mask"],
    )
    got = mrope_positions(inputs["input_ids"][0], inputs["image_grid_thw"], spec)
    assert torch.equal(got, expected[:, 0])
    # After a 4x6 grid (2x3 merged) text resumes at start + 3, not start + 6 tokens.
    assert got[0].max() < got.shape[1] - 1


def test_left_padded_rows_match_transformers(processor, vl_model):
    spec = MRopeSpec.of(vl_model.config)
    rows = [_inputs(processor, [(56, 56)]), _inputs(processor, [(84, 84)], "Count them, please")]
    width = max(r["input_ids"].shape[1] for r in rows)
    ids = torch.zeros(2, width, dtype=torch.long)
    mask = torch.zeros(2, width, dtype=torch.long)
    types = torch.zeros(2, width, dtype=torch.long)
    for i, r in enumerate(rows):
        n = r["input_ids"].shape[1]
        ids[i, width - n :], mask[i, width - n :] = r["input_ids"][0], 1
        types[i, width - n :] = r["mm_token_type_ids"][0]
    grids = torch.cat([r["image_grid_thw"] for r in rows])
    expected, _ = vl_model.model.get_rope_index(
        ids, types, image_grid_thw=grids, attention_mask=mask
    )
    got = batch_mrope_positions(ids, mask, [r["image_grid_thw"] for r in rows], spec)
    assert torch.equal(got, expected.transpose(0, 1))


def test_text_model_has_no_spec(processor):
    from kuberl_runtime.testing.tiny import build_tiny_qwen2_config

    assert MRopeSpec.of(build_tiny_qwen2_config(processor.tokenizer)) is None
