"""``actor_rollout_ref.ref.*``: the frozen reference policy for KL terms."""

from pydantic import Field

from kuberl_api.backend_config.actor import FSDPConfig, Strategy
from kuberl_api.backend_config.verl_keys import VerlRefKeys


class RefConfig(VerlRefKeys):
    strategy: Strategy | None = Field(None, description="Null follows actor.strategy.")
    fsdp_config: FSDPConfig = Field(default_factory=lambda: FSDPConfig(forward_only=True))
    log_prob_micro_batch_size: int | None = Field(
        None, gt=0, description="Deprecated: use log_prob_micro_batch_size_per_gpu."
    )
    log_prob_micro_batch_size_per_gpu: int | None = Field(None, gt=0)
    log_prob_use_dynamic_bsz: bool | None = Field(None, description="Null follows actor.")
    log_prob_max_token_len_per_gpu: int | None = Field(None, gt=0)
    ulysses_sequence_parallel_size: int | None = Field(None, gt=0)
    use_torch_compile: bool | None = None
    entropy_from_logits_with_chunking: bool = False
    entropy_checkpointing: bool = False
