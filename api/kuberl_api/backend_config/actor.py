"""``actor_rollout_ref.actor.*``: the policy's PPO update, optimiser, FSDP and checkpoints."""

from typing import Literal

from pydantic import Field

from kuberl_api.backend_config.verl_keys import (
    VerlActorKeys,
    VerlCheckpointKeys,
    VerlFSDPKeys,
    VerlOptimKeys,
)
from kuberl_api.base import ConfigModel

LossAggMode = Literal[
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
]
KLEstimator = Literal["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"]
Strategy = Literal["fsdp", "fsdp2"]
# verl 0.9.1's registered policy losses but bypass_mode (rollout correction selects it).
LossMode = Literal[
    "vanilla",
    "gspo",
    "gpg",
    "clip_cov",
    "kl_cov",
    "geo_mean",
    "cispo",
    "sapo",
    "dppo_tv",
    "dppo_kl",
    "dro",
]
LRSchedule = Literal["constant", "cosine", "wsd"]
# optim.optimizer: the torch.optim classes verl 0.9.1's build_optimizer can build from its
# arguments (lr, weight_decay, betas when the name holds "adam"; optimizer_impl torch.optim).
# Not: LBFGS, Rprop (no weight_decay), SparseAdam (sparse gradients, no weight_decay), Muon
# (2-D parameters only; a model has 1-D norms and biases).
TorchOptimizer = Literal[
    "AdamW", "Adam", "Adamax", "NAdam", "RAdam", "SGD", "Adagrad", "Adadelta", "RMSprop"
]


class OptimConfig(VerlOptimKeys):
    lr: float = Field(1e-6, gt=0)
    lr_warmup_steps: int | None = Field(-1, description="<= 0 or null uses the ratio.")
    lr_warmup_steps_ratio: float = Field(0.0, ge=0, le=1)
    lr_scheduler_type: LRSchedule | None = Field(
        None,
        description="Schedule after warmup; null means constant. wsd: warmup-stable-decay "
        "(verl's get_wsd_schedule_with_warmup: 90% of the post-warmup steps constant, then "
        "cosine to min_lr_ratio).",
    )
    warmup_style: Literal["constant", "cosine"] | None = Field(
        None, description="Deprecated: use lr_scheduler_type."
    )
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="Cosine floor as a fraction of lr.")
    num_cycles: float = Field(0.5, gt=0)
    total_training_steps: int = Field(-1, description="Set by the trainer.")
    weight_decay: float = Field(0.01, ge=0)
    betas: list[float] = Field(default_factory=lambda: [0.9, 0.999], min_length=2, max_length=2)
    optimizer: TorchOptimizer = Field(
        "AdamW", description="A torch.optim class, as verl builds it."
    )
    clip_grad: float = Field(1.0, gt=0)


class WrapPolicyConfig(ConfigModel):
    min_num_params: int = Field(0, ge=0, description="> 0 wraps by size, else per decoder layer.")


DTypeName = Literal["bfloat16", "float16", "float32", "bf16", "fp16", "fp32"]


class MixedPrecisionConfig(ConfigModel):
    """verl's FSDP workers read ``fsdp_config.mixed_precision`` (added with Hydra's ``+``)."""

    param_dtype: DTypeName | None = Field(None, description="Null: fsdp_config.dtype.")
    reduce_dtype: DTypeName = "fp32"
    buffer_dtype: DTypeName = "fp32"


class FSDPConfig(VerlFSDPKeys):
    wrap_policy: WrapPolicyConfig = Field(default_factory=WrapPolicyConfig)
    mixed_precision: MixedPrecisionConfig = Field(default_factory=MixedPrecisionConfig)
    param_offload: bool = False
    grad_offload: bool = Field(False, description="Deprecated: FSDP2 offloads grads with params.")
    optimizer_offload: bool = False
    offload_policy: bool = False
    reshard_after_forward: bool = True
    fsdp_size: int = Field(-1, description="-1 shards over all ranks; else hybrid shard groups.")
    model_dtype: Literal["fp32", "bf16", "fp16", "float32", "bfloat16", "float16"] = "fp32"
    dtype: DTypeName = "bfloat16"
    forward_prefetch: bool = False
    use_orig_params: bool = False
    forward_only: bool = False
    seed: int = 42


class CheckpointConfig(VerlCheckpointKeys):
    save_contents: list[Literal["model", "optimizer", "extra", "hf_model"]] = Field(
        default_factory=lambda: ["model", "optimizer", "extra"]
    )
    load_contents: list[Literal["model", "optimizer", "extra", "hf_model"]] | None = Field(
        None, description="Null loads what save_contents saves."
    )


class PolicyLossConfig(ConfigModel):
    loss_mode: LossMode = "vanilla"
    clip_cov_ratio: float = Field(0.0002, description="clip_cov: share of tokens cut (> 0).")
    clip_cov_lb: float = Field(1.0, description="clip_cov: lower covariance bound.")
    clip_cov_ub: float = Field(5.0, description="clip_cov: upper covariance bound.")
    kl_cov_ratio: float = Field(0.0002, description="kl_cov: share of tokens penalised, (0, 1].")
    ppo_kl_coef: float = Field(0.1, description="kl_cov: coefficient of the |log-ratio| penalty.")
    dro_beta: float | None = Field(None, description="dro: the quadratic penalty, > 0 (required).")


class ActorConfig(VerlActorKeys):
    strategy: Strategy = "fsdp"
    ppo_mini_batch_size: int = Field(256, gt=0, description="Prompts per optimizer step.")
    ppo_micro_batch_size: int | None = Field(
        None, gt=0, description="Deprecated global micro batch: use ppo_micro_batch_size_per_gpu."
    )
    ppo_micro_batch_size_per_gpu: int | None = Field(
        None, gt=0, description="Responses per forward/backward on one accelerator."
    )
    use_dynamic_bsz: bool = False
    ppo_max_token_len_per_gpu: int = Field(16384, gt=0)
    grad_clip: float = Field(1.0, gt=0)
    clip_ratio: float = Field(0.2, gt=0, lt=1)
    clip_ratio_low: float | None = Field(
        0.2, gt=0, description="Null uses clip_ratio; 1 or more: no lower clip (CISPO's 10)."
    )
    clip_ratio_high: float | None = Field(0.2, gt=0, description="Null uses clip_ratio.")
    clip_ratio_c: float = Field(3.0, gt=1, description="Dual-clip bound for negative advantages.")
    policy_loss: PolicyLossConfig = Field(default_factory=PolicyLossConfig)
    tau_pos: float = Field(1.0, gt=0, description="sapo: gate temperature where A > 0.")
    tau_neg: float = Field(1.05, gt=0, description="sapo: gate temperature where A <= 0.")
    loss_agg_mode: LossAggMode = "token-mean"
    loss_scale_factor: float | None = Field(None, gt=0)
    entropy_coeff: float = 0.0
    calculate_entropy: bool = False
    use_kl_loss: bool = False
    kl_loss_coef: float = Field(0.001, ge=0)
    kl_loss_type: KLEstimator = "low_var_kl"
    ppo_epochs: int = Field(1, gt=0)
    shuffle: bool = False
    data_loader_seed: int = 42
    ulysses_sequence_parallel_size: int = Field(1, gt=0)
    use_torch_compile: bool = True
    entropy_from_logits_with_chunking: bool = False
    entropy_checkpointing: bool = False
    use_remove_padding: bool | None = Field(None, description="Null follows model.")
    use_fused_kernels: bool | None = Field(None, description="Null follows model.")
    optim: OptimConfig = Field(default_factory=OptimConfig)
    fsdp_config: FSDPConfig = Field(default_factory=FSDPConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)

    # ---- kuberl extension (issue 15): not a verl key, off by default (verl 0.9.1 always
    # recomputes π_old). Needs an exactly on-policy update (validation/rules_batch.py).
    on_policy_shortcut: bool = Field(
        False,
        description=(
            "Skip the old-log-prob forward when the update is exactly on-policy (ppo_epochs 1, "
            "one mini-batch per step, no KL in reward): π_old is the update pass's own detached "
            "log-prob and actor/entropy comes from the update pass, as in TRL at one iteration."
        ),
    )
