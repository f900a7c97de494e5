"""RL prompt data: verl-schema files → unpadded token-id samples → resumable batches."""

from kuberl_runtime.data.dataset import DatasetOptions, PromptSample, RLDataset
from kuberl_runtime.data.errors import DataError
from kuberl_runtime.data.files import SourceRow, read_rows
from kuberl_runtime.data.sampler import PromptBatchSampler
from kuberl_runtime.data.tokenize import TRUNCATION_MODES, Truncation, truncate_prompt_ids

__all__ = [
    "TRUNCATION_MODES",
    "DataError",
    "DatasetOptions",
    "PromptBatchSampler",
    "PromptSample",
    "RLDataset",
    "SourceRow",
    "Truncation",
    "read_rows",
    "truncate_prompt_ids",
]
