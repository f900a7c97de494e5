"""``data.*``: where prompts come from and how they are cut to size."""

from typing import Any, Literal

from pydantic import Field

from kuberl_api.backend_config.verl_keys import VerlDataKeys
from kuberl_api.base import ConfigModel

Truncation = Literal["error", "left", "right", "middle"]


class CustomClassConfig(ConfigModel):
    path: str | None = None
    name: str | None = None


class DataConfig(VerlDataKeys):
    tokenizer: str | None = Field(None, description="Tokenizer path; null uses the actor model's.")
    use_shm: bool = False
    train_files: str | list[str] = Field(
        description="Parquet/JSON/JSONL/CSV file or list of files with the training prompts."
    )
    val_files: str | list[str] | None = Field(
        None, description="Validation files; null disables validation."
    )
    train_max_samples: int = Field(-1, description="> 0 keeps only this many training rows.")
    val_max_samples: int = -1
    prompt_key: str = Field("prompt", description="Column holding the chat messages.")
    reward_fn_key: str = Field("data_source", description="Column that selects the scorer.")
    image_key: str = "images"
    video_key: str = "videos"
    max_prompt_length: int = Field(
        512, gt=0, le=1_048_576, description="Prompt tokens kept after templating."
    )
    max_response_length: int = Field(
        512, gt=0, le=1_048_576, description="Most tokens generated per response."
    )
    train_batch_size: int = Field(
        1024, gt=0, le=10_000_000, description="Prompts per training step."
    )
    val_batch_size: int | None = Field(
        None, gt=0, description="Deprecated: the whole validation set is one batch."
    )
    gen_batch_size: int | None = Field(None, gt=0)
    return_raw_input_ids: bool = False
    return_raw_chat: bool = True
    return_full_prompt: bool = False
    shuffle: bool = True
    validation_shuffle: bool = False
    seed: int | None = Field(None, description="Sampler seed; null uses trainer.seed.")
    dataloader_num_workers: int = Field(8, ge=0)
    filter_overlong_prompts: bool = False
    filter_overlong_prompts_workers: int = Field(1, ge=1)
    truncation: Truncation = Field(
        "error", description="What to do with a prompt over max_prompt_length."
    )
    trust_remote_code: bool = False
    custom_cls: CustomClassConfig = Field(default_factory=CustomClassConfig)
    apply_chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
