"""``actor_rollout_ref.model.*``: the Hugging Face model being trained."""

from typing import Any

from pydantic import Field

from kuberl_api.backend_config.verl_keys import VerlModelKeys


class ModelConfig(VerlModelKeys):
    path: str = Field(description="Hugging Face model directory (a mounted path).")
    hf_config_path: str | None = None
    tokenizer_path: str | None = None
    custom_chat_template: str | None = None
    external_lib: str | None = Field(None, description="Module imported to register models.")
    external_libs: list[str] | None = None
    override_config: dict[str, Any] = Field(
        default_factory=dict, description="Merged into the Hugging Face model config."
    )
    enable_gradient_checkpointing: bool = True
    enable_activation_offload: bool = False
    use_remove_padding: bool = Field(True, description="Packed (varlen) forward passes.")
    use_fused_kernels: bool = False
    use_liger: bool = False
    lora_rank: int = Field(0, ge=0, description="> 0 enables LoRA adapters.")
    lora_alpha: int = Field(16, gt=0)
    target_modules: str | list[str] = "all-linear"
    exclude_modules: str | list[str] | None = None
    lora_adapter_path: str | None = None
    trust_remote_code: bool = False
