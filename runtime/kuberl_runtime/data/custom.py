"""`data.custom_cls`: a user's Dataset class, loaded and called the way verl 0.9.1 does.

`path` is a Python file (optionally `file://`) or `pkg://dotted.module`; `name` is the class,
which must subclass `torch.utils.data.Dataset`. It is built as
`cls(data_files=, tokenizer=, processor=None, config=<data section>, max_samples=)` and each item
is a verl row: `raw_prompt` (chat messages; else the `data.prompt_key` column), `data_source`,
`reward_model.ground_truth`, `extra_info`. kuberl then renders, tokenises and truncates every
item with the same rules as its own files.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from torch.utils.data import Dataset

from kuberl_runtime.data.dataset import DatasetOptions, RLDataset
from kuberl_runtime.data.errors import DataError
from kuberl_runtime.data.files import SourceRow, as_path_list
from kuberl_runtime.data.tokenize import ChatTokenizer

PKG = "pkg://"
FILE = "file://"


def load_dataset_class(path: str, name: str) -> type[Dataset]:
    module = _load_module(path)
    cls = getattr(module, name, None)
    if cls is None:
        raise DataError(f"data.custom_cls.name={name!r} is not defined in {path}")
    if not (isinstance(cls, type) and issubclass(cls, Dataset)):
        raise DataError(
            f"data.custom_cls {name!r} from {path} must subclass torch.utils.data.Dataset"
        )
    return cls


def _load_module(path: str) -> Any:
    if path.startswith(PKG):
        return importlib.import_module(path[len(PKG) :].replace("/", "."))
    file = Path(path.removeprefix(FILE))
    if not file.is_file():
        raise DataError(f"data.custom_cls.path={path!r}: no such file")
    digest = hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"kuberl_custom_dataset_{digest}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def custom_dataset(
    cls: type[Dataset],
    files: list[str],
    tokenizer: ChatTokenizer,
    options: DatasetOptions,
    data_config: dict[str, Any],
    max_samples: int,
) -> RLDataset:
    """Every item of the user's dataset as a `PromptSample`."""
    source = f"data.custom_cls {cls.__name__}"
    user = cls(
        data_files=as_path_list(files),
        tokenizer=tokenizer,
        processor=None,
        config=OmegaConf.create(data_config),
        max_samples=max_samples,
    )
    rows = [SourceRow(source, i, _record(user[i], options, source, i)) for i in range(len(user))]
    if not rows:
        raise DataError(f"{source} returned no items for {files}")
    return RLDataset.from_rows(rows, tokenizer, options, source)


def _record(item: Any, options: DatasetOptions, source: str, index: int) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise DataError(f"{source} item {index} is a {type(item).__name__}, not a verl row dict")
    record = dict(item)
    if "raw_prompt" in record:
        record[options.prompt_key] = record["raw_prompt"]
    return record
