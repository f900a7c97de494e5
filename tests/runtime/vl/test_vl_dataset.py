"""Image rows as verl's geometry3k preprocessing writes them: cells, placeholders, lengths."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kuberl_runtime.data import DataError, DatasetOptions, RLDataset
from kuberl_runtime.testing.dots import build_dot_rows, draw_dots, png_bytes


def _write(tmp_path, rows, name="rows.parquet"):
    path = tmp_path / name
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _load(tmp_path, processor, rows, **options):
    opts = DatasetOptions(**{"max_prompt_length": 64, **options})
    return RLDataset.from_files(_write(tmp_path, rows), processor.tokenizer, opts, processor)


def test_bytes_and_path_cells_give_the_same_prompt(tmp_path, processor):
    rows = build_dot_rows(1, seed=5)
    picture = tmp_path / "dots.png"
    picture.write_bytes(rows[0]["images"][0]["bytes"])
    by_path = [{**rows[0], "images": [{"bytes": None, "path": str(picture)}]}]
    a = _load(tmp_path, processor, rows).batch([0])[0]
    b = _load(tmp_path, processor, by_path).batch([0])[0]
    assert a.prompt_ids == b.prompt_ids
    assert (a.vision.inputs["pixel_values"] == b.vision.inputs["pixel_values"]).all()
    assert a.raw_prompt == rows[0]["prompt"]  # the chat as written, placeholder included


def test_a_text_row_beside_image_rows_stays_text(tmp_path, processor):
    rows = build_dot_rows(2, seed=1)
    rows[1]["images"] = []
    rows[1]["prompt"] = [{"role": "user", "content": "What is 2 + 3?"}]
    dataset = _load(tmp_path, processor, rows)
    assert dataset.samples[0].vision is not None and dataset.samples[1].vision is None


def test_placeholders_must_match_the_images(tmp_path, processor):
    rows = build_dot_rows(1)
    rows[0]["images"].append({"bytes": png_bytes(draw_dots(1, random.Random(0)))})
    with pytest.raises(DataError, match=r"2 image\(s\) in 'images' but 1 <image> placeholder"):
        _load(tmp_path, processor, rows)


def test_lengths_count_vision_tokens(tmp_path, processor):
    rows = build_dot_rows(3)
    full = len(_load(tmp_path, processor, rows).samples[0].prompt_ids)
    # 4 vision tokens make the difference between fitting and being filtered.
    kept = _load(tmp_path, processor, rows, max_prompt_length=full, filter_overlong_prompts=True)
    assert len(kept) == 3
    with pytest.raises(DataError, match="every row"):
        _load(tmp_path, processor, rows, max_prompt_length=full - 1, filter_overlong_prompts=True)


def test_truncation_never_cuts_vision_tokens(tmp_path, processor):
    rows = build_dot_rows(1)
    ids = _load(tmp_path, processor, rows).samples[0].prompt_ids
    full = len(ids)
    start = ids.index(processor.tokenizer.convert_tokens_to_ids("<|vision_start|>"))
    # Left truncation past the vision start marker cuts into the picture's tokens.
    with pytest.raises(DataError, match="would cut into them"):
        _load(tmp_path, processor, rows, max_prompt_length=full - start - 1, truncation="left")
    left = _load(tmp_path, processor, rows, max_prompt_length=full - start, truncation="left")
    assert left.samples[0].prompt_ids == ids[start:]
    # Right truncation only cuts the question's tail: allowed.
    right = _load(tmp_path, processor, rows, max_prompt_length=full - 3, truncation="right")
    assert len(right.samples[0].prompt_ids) == full - 3


def test_videos_and_text_models_are_refused_with_the_fix(tmp_path, processor):
    rows = build_dot_rows(1)
    with pytest.raises(DataError, match="no image processor"):
        RLDataset.from_files(
            _write(tmp_path, rows), processor.tokenizer, DatasetOptions(max_prompt_length=64)
        )
    rows[0]["videos"] = [{"path": "clip.mp4"}]
    with pytest.raises(DataError, match="video prompts are not supported yet"):
        _load(tmp_path, processor, rows)
