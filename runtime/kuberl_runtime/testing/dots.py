"""Synthetic image prompts: "how many dots?" over 56×56 pictures of 1–4 coloured dots.

Rows follow verl's geometry3k layout: a chat `prompt` whose user turn starts with `<image>`, an
`images` column of `[{"bytes": <PNG>}]`, `reward_model.ground_truth` the count as a string,
scored like GSM8K (`#### N`) under data_source `kuberl/dots`. The answer is only in the picture,
so a policy can only earn reward by looking at it. No download.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image, ImageDraw

DATA_SOURCE = "kuberl/dots"
QUESTION = '<image>How many dots are in the picture? Output the final answer after "####".'
SIZE = 56
_CELLS = [(col, row) for row in range(3) for col in range(3)]
_COLOURS = [(220, 40, 40), (40, 160, 60), (40, 80, 220), (200, 160, 20)]


def draw_dots(count: int, rng: random.Random) -> Image.Image:
    """`count` dots of one colour in distinct cells of a 3×3 grid on white."""
    image = Image.new("RGB", (SIZE, SIZE), (255, 255, 255))
    pen = ImageDraw.Draw(image)
    colour = rng.choice(_COLOURS)
    for col, row in rng.sample(_CELLS, count):
        x, y = 10 + col * 18, 10 + row * 18
        pen.ellipse((x - 6, y - 6, x + 6, y + 6), fill=colour)
    return image


def png_bytes(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def build_dot_rows(num_rows: int, seed: int = 0, split: str = "train") -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for index in range(num_rows):
        count = rng.randint(1, 4)
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": QUESTION}],
                "images": [{"bytes": png_bytes(draw_dots(count, rng))}],
                "ability": "counting",
                "reward_model": {"style": "rule", "ground_truth": str(count)},
                "extra_info": {"split": split, "index": index},
            }
        )
    return rows


def write_dot_datasets(
    out_dir: str | Path, num_train: int = 64, num_test: int = 16, seed: int = 0
) -> tuple[Path, Path]:
    """train.parquet and test.parquet under `out_dir` (different seeds, so different pictures)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, rows in (
        ("train", build_dot_rows(num_train, seed, "train")),
        ("test", build_dot_rows(num_test, seed + 1, "test")),
    ):
        path = out / f"{split}.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
        paths.append(path)
    return paths[0], paths[1]
