from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from kuberl_runtime.data import DataError, DatasetOptions, RLDataset


def _chat(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


def _template_ids(tokenizer, messages) -> list[int]:
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_samples_carry_unpadded_template_ids_and_metadata(
    make_row, tokenizer, write_parquet
) -> None:
    rows = [make_row(_chat("Ava has 3 apples."), "3", index=7), make_row(_chat("Hi"), "5", 8)]
    dataset = RLDataset.from_files(write_parquet(rows), tokenizer)
    assert len(dataset) == 2
    sample = dataset[0]
    assert sample.prompt_ids == _template_ids(tokenizer, rows[0]["prompt"])
    assert tokenizer.pad_token_id not in sample.prompt_ids
    assert (sample.index, sample.data_source, sample.ground_truth) == (7, "kuberl/arith", "3")
    assert (sample.ability, sample.reward_style) == ("math", "rule")
    assert sample.extra_info == {"split": "train", "index": 7}
    assert sample.raw_prompt == rows[0]["prompt"]
    # Unequal lengths prove nothing was padded to a common width.
    assert len(dataset[1].prompt_ids) < len(sample.prompt_ids)


def test_plain_string_prompt_is_one_user_message(make_row, tokenizer, write_parquet) -> None:
    dataset = RLDataset.from_files(write_parquet([make_row("What is 2+2?")]), tokenizer)
    assert dataset[0].prompt_ids == _template_ids(tokenizer, _chat("What is 2+2?"))


def test_prompt_key_selects_the_column(make_row, tokenizer, write_parquet) -> None:
    rows = [make_row(_chat("ignored"), question=_chat("chosen"))]
    options = DatasetOptions(prompt_key="question")
    dataset = RLDataset.from_files(write_parquet(rows), tokenizer, options)
    assert dataset[0].raw_prompt == _chat("chosen")


def test_raw_mode_skips_the_template(make_row, tokenizer, write_parquet) -> None:
    options = DatasetOptions(use_chat_template=False, return_raw_chat=False)
    dataset = RLDataset.from_files(write_parquet([make_row("2+2=")]), tokenizer, options)
    assert tokenizer.decode(dataset[0].prompt_ids) == "2+2="
    assert dataset[0].raw_prompt is None


def test_index_falls_back_to_row_position(make_row, tokenizer, write_parquet) -> None:
    rows = [make_row("a", extra_info=None), make_row("b", extra_info=None)]
    dataset = RLDataset.from_files(write_parquet(rows), tokenizer)
    assert [s.index for s in dataset.samples] == [0, 1]
    assert dataset[0].extra_info == {}


def test_missing_column_names_it_and_lists_columns(make_row, tokenizer, write_parquet) -> None:
    path = write_parquet([make_row(_chat("x"))])
    with pytest.raises(DataError) as info:
        RLDataset.from_files(path, tokenizer, DatasetOptions(prompt_key="question"))
    message = str(info.value)
    assert "'question'" in message and str(path) in message
    assert "['ability', 'data_source', 'extra_info', 'prompt', 'reward_model']" in message


@pytest.mark.parametrize("truncation", ["left", "right", "middle"])
def test_truncation_modes_apply_to_template_ids(
    make_row, tokenizer, write_parquet, truncation
) -> None:
    rows = [make_row(_chat("Ava has 12 apples and 34 pears."))]
    full = _template_ids(tokenizer, rows[0]["prompt"])
    limit = len(full) - 5
    expected = {
        "left": full[-limit:],
        "right": full[:limit],
        "middle": full[: limit // 2] + full[-(limit - limit // 2) :],
    }[truncation]
    options = DatasetOptions(max_prompt_length=limit, truncation=truncation)
    assert RLDataset.from_files(write_parquet(rows), tokenizer, options)[0].prompt_ids == expected


def test_truncation_error_says_where_how_long_and_what_to_do(
    make_row, tokenizer, write_parquet
) -> None:
    rows = [make_row(_chat("short")), make_row(_chat("a much longer prompt " * 5))]
    path = write_parquet(rows)
    length = len(_template_ids(tokenizer, rows[1]["prompt"]))
    limit = len(_template_ids(tokenizer, rows[0]["prompt"]))
    with pytest.raises(DataError) as info:
        RLDataset.from_files(path, tokenizer, DatasetOptions(max_prompt_length=limit))
    message = str(info.value)
    assert f"{path} row 1 is {length} tokens" in message
    assert f"data.max_prompt_length={limit}" in message
    for hint in ("raise data.max_prompt_length", "data.truncation", "filter_overlong_prompts"):
        assert hint in message


def test_filter_overlong_drops_exactly_the_long_rows(make_row, tokenizer, write_parquet) -> None:
    rows = [make_row(_chat("x" * n), index=i) for i, n in enumerate([1, 40, 2, 80, 3])]
    lengths = [len(_template_ids(tokenizer, r["prompt"])) for r in rows]
    limit = sorted(lengths)[2]  # keeps the three shortest, including one exactly at the limit
    options = DatasetOptions(max_prompt_length=limit, filter_overlong_prompts=True)
    dataset = RLDataset.from_files(write_parquet(rows), tokenizer, options)
    assert [s.index for s in dataset.samples] == [i for i, n in enumerate(lengths) if n <= limit]


def test_filter_that_drops_everything_is_an_error(make_row, tokenizer, write_parquet) -> None:
    options = DatasetOptions(max_prompt_length=1, filter_overlong_prompts=True)
    with pytest.raises(DataError, match="every row"):
        RLDataset.from_files(write_parquet([make_row("hello")]), tokenizer, options)


def test_empty_data_source_is_reported_with_row(make_row, tokenizer, write_parquet) -> None:
    path = write_parquet([make_row("a"), make_row("b", data_source=None)])
    with pytest.raises(DataError, match=r"'data_source' is empty in .* row 1"):
        RLDataset.from_files(path, tokenizer)


def test_bad_message_is_reported_with_row(make_row, tokenizer, write_parquet) -> None:
    path = write_parquet([make_row(_chat("ok")), make_row([{"role": "user", "text": "x"}])])
    with pytest.raises(DataError, match=r"row 1 has a message without string 'role' and 'content'"):
        RLDataset.from_files(path, tokenizer)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [({"truncation": "both"}, "data.truncation='both'"), ({"max_prompt_length": 0}, "> 0")],
)
def test_invalid_options_are_data_errors(kwargs, pattern) -> None:
    with pytest.raises(DataError, match=pattern):
        DatasetOptions(**kwargs)


def test_json_jsonl_csv_datasets_equal_parquet(
    make_row, tokenizer, write_parquet, tmp_path: Path
) -> None:
    rows = [make_row(_chat(f"Ben has {i} coins."), str(i), index=i) for i in range(5)]
    expected = RLDataset.from_files(write_parquet(rows), tokenizer).samples
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "d.json").write_text(json.dumps(rows))
    with (tmp_path / "d.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "data_source",
                "prompt",
                "ability",
                "reward_model.style",
                "reward_model.ground_truth",
                "extra_info",
            ]
        )
        for r in rows:
            writer.writerow(
                [
                    r["data_source"],
                    json.dumps(r["prompt"]),
                    r["ability"],
                    r["reward_model"]["style"],
                    r["reward_model"]["ground_truth"],
                    json.dumps(r["extra_info"]),
                ]
            )
    for name in ("d.jsonl", "d.json", "d.csv"):
        assert RLDataset.from_files(tmp_path / name, tokenizer).samples == expected, name


def test_batch_returns_samples_in_index_order(make_row, tokenizer, write_parquet) -> None:
    rows = [make_row(str(i), index=i) for i in range(4)]
    dataset = RLDataset.from_files(write_parquet(rows), tokenizer)
    assert [s.index for s in dataset.batch([3, 0, 2])] == [3, 0, 2]


def test_unparseable_file_is_a_data_error(tokenizer, tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(DataError, match=r"cannot read data file .*broken\.parquet"):
        RLDataset.from_files(path, tokenizer)
