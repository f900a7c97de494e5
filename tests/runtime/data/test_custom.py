"""`custom_chat_template` and `data.custom_cls` change what the policy is given as prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuberl_runtime.data import DataError, DatasetOptions, RLDataset
from kuberl_runtime.data.custom import custom_dataset, load_dataset_class
from kuberl_runtime.data.tokenizer import load_tokenizer

from .conftest import TOKENIZER_DIR

TEMPLATE = (
    "{% for m in messages %}Q: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}A:{% endif %}"
)


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_custom_chat_template_renders_every_prompt(make_row, write_parquet) -> None:
    plain = load_tokenizer(str(TOKENIZER_DIR), trust_remote_code=False)
    custom = load_tokenizer(
        str(TOKENIZER_DIR), trust_remote_code=False, custom_chat_template=TEMPLATE
    )
    path = write_parquet([make_row([{"role": "user", "content": "2+3"}])])
    default_ids = RLDataset.from_files(path, plain)[0].prompt_ids
    custom_ids = RLDataset.from_files(path, custom)[0].prompt_ids
    assert custom_ids == _encode(custom, "Q: 2+3\nA:")
    assert default_ids == _encode(plain, "<|im_start|>user\n2+3<|im_end|>\n<|im_start|>assistant\n")
    assert custom_ids != default_ids


DATASET_CLASS = '''
from torch.utils.data import Dataset

class Doubled(Dataset):
    """Reads nothing from disk: two prompts per file name, the config decides the answer."""

    def __init__(self, data_files, tokenizer, processor, config, max_samples=-1):
        self.items = []
        for i, name in enumerate(data_files):
            for copy in range(2):
                self.items.append({
                    "raw_prompt": [{"role": "user", "content": f"{name} #{copy}"}],
                    "data_source": "custom/src",
                    "reward_model": {"ground_truth": str(config.max_prompt_length)},
                    "extra_info": {"index": 10 * i + copy},
                })
        if max_samples > 0:
            self.items = self.items[:max_samples]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

class NotADataset:
    pass
'''


@pytest.fixture
def class_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_dataset.py"
    path.write_text(DATASET_CLASS)
    return path


def test_custom_dataset_class_supplies_the_prompts(class_file: Path, tokenizer) -> None:
    cls = load_dataset_class(str(class_file), "Doubled")
    options = DatasetOptions(max_prompt_length=64)
    dataset = custom_dataset(
        cls,
        ["a.parquet", "b.parquet"],
        tokenizer,
        options,
        {"max_prompt_length": 64},
        max_samples=3,
    )
    assert len(dataset) == 3
    first = dataset[0]
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "a.parquet #0"}], add_generation_prompt=True, tokenize=False
    )
    assert first.prompt_ids == _encode(tokenizer, text)
    assert (first.data_source, first.ground_truth) == ("custom/src", "64")
    assert [s.index for s in dataset.samples] == [0, 1, 10]


def test_file_scheme_and_bad_classes_are_refused_clearly(class_file: Path) -> None:
    assert load_dataset_class(f"file://{class_file}", "Doubled").__name__ == "Doubled"
    with pytest.raises(DataError, match=r"must subclass torch\.utils\.data\.Dataset"):
        load_dataset_class(str(class_file), "NotADataset")
    with pytest.raises(DataError, match="is not defined"):
        load_dataset_class(str(class_file), "Missing")
    with pytest.raises(DataError, match="no such file"):
        load_dataset_class(str(class_file.with_name("absent.py")), "Doubled")


def test_the_run_builds_its_datasets_from_the_custom_class(class_file: Path) -> None:
    from kuberl_runtime.config import run_config_from_dict
    from kuberl_runtime.trainer.components import _dataset

    run = run_config_from_dict(
        {
            "data": {
                "train_files": "x.parquet",
                "train_batch_size": 2,
                "max_prompt_length": 48,
                "custom_cls": {"path": str(class_file), "name": "Doubled"},
            },
            "actor_rollout_ref": {
                "model": {"path": str(TOKENIZER_DIR), "custom_chat_template": TEMPLATE},
                "actor": {"ppo_mini_batch_size": 2, "ppo_micro_batch_size_per_gpu": 1},
                "rollout": {
                    "n": 1,
                    "log_prob_micro_batch_size_per_gpu": 1,
                    "tensor_model_parallel_size": 1,
                },
            },
            "algorithm": {"adv_estimator": "grpo"},
            "trainer": {"device": "cpu", "nnodes": 1, "n_gpus_per_node": 1},
        }
    )
    plan = run.plan
    tokenizer = load_tokenizer(
        plan.data.tokenizer,
        trust_remote_code=False,
        custom_chat_template=plan.model.custom_chat_template,
    )
    dataset = _dataset(plan, plan.data.train_files, tokenizer, plan.data.train_max_samples)
    assert [s.ground_truth for s in dataset.samples] == ["48", "48"]
    assert dataset[0].prompt_ids == _encode(tokenizer, "Q: x.parquet #0\nA:")
