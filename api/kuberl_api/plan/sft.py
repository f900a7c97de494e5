"""``SFTPlan``: a validated SFT config resolved once, like ``RunPlan`` for RL.

The parts SFT shares with RL (placement, paths, model, optimizer, FSDP, checkpoint contents) are
the RL plan's own sections, built by the same functions, so a key means the same in both.
"""

import json
import os
import posixpath
from typing import Any, Literal

from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.plan.common import (
    checkpoint_section,
    file_list,
    fsdp_section,
    model_section,
    optim_section,
)
from kuberl_api.plan.remote_inputs import checkpoint_mirror, paths_section, resume_input
from kuberl_api.plan.sections import (
    CheckpointPlan,
    Frozen,
    FSDPPlan,
    ModelPlan,
    OptimPlan,
    PathsPlan,
    PlacementPlan,
)
from kuberl_api.plan.version import PLAN_VERSION, check_plan_version
from kuberl_api.storage import output_location, output_url

SFT_JOB_TYPE = "sft"
DEFAULT_NCCL_TIMEOUT = 600


class SFTDataPlan(Frozen):
    tokenizer: str
    """model.tokenizer_path, else model.path."""
    train_files: list[str]
    val_files: list[str]
    """Empty: no validation loss."""
    train_max_samples: int
    val_max_samples: int
    messages_key: str
    max_length: int
    truncation: Literal["error", "left", "right"]
    train_batch_size: int
    """Conversations per optimizer step, over all ranks."""
    micro_batch_size_per_gpu: int
    use_dynamic_bsz: bool
    max_token_len_per_gpu: int
    apply_chat_template_kwargs: dict[str, Any]


class SFTTrainerPlan(Frozen):
    total_epochs: int
    total_training_steps: int
    """0: total_epochs x steps per epoch (the dataset decides)."""
    project_name: str
    experiment_name: str
    loggers: list[str]
    save_freq: int
    test_freq: int
    resume_mode: Literal["auto", "disable", "resume_path"]
    resume_from_path: str
    max_ckpt_to_keep: int
    """0: keep every checkpoint."""
    seed: int
    checkpoint_mirror: str
    """trainer.default_hdfs_dir as a URL (as RL's TrainerPlan.checkpoint_mirror). Empty: none."""


class SFTPlan(Frozen):
    job_type: Literal["sft"]
    placement: PlacementPlan
    paths: PathsPlan
    data: SFTDataPlan
    model: ModelPlan
    use_remove_padding: bool
    optim: OptimPlan
    grad_clip: float
    fsdp_config: FSDPPlan
    checkpoint: CheckpointPlan
    trainer: SFTTrainerPlan
    source: dict[str, Any]
    """The effective SFT config, for the record (trackers, the checkpoint's config.json)."""
    plan_version: int = PLAN_VERSION
    """As ``RunPlan.plan_version``."""
    source_digest: str = ""
    """As ``RunPlan.source_digest``."""

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> "SFTPlan":
        check_plan_version(text)
        return cls.model_validate_json(text)


def is_sft_plan_json(text: str) -> bool:
    return json.loads(text).get("job_type") == SFT_JOB_TYPE


def build_sft_plan(cfg: SFTConfig, af_output_dir: str | None = None) -> SFTPlan:
    trainer = cfg.trainer
    assert trainer.nnodes and trainer.n_gpus_per_node, "filled at validation"
    nnodes, per_node = trainer.nnodes, trainer.n_gpus_per_node
    sp = cfg.engine.ulysses_sequence_parallel_size
    local = trainer.default_local_dir or posixpath.join(
        "checkpoints", trainer.project_name, trainer.experiment_name
    )
    if af_output_dir:
        local = posixpath.join(output_location(af_output_dir), local)
    paths = _paths(local, af_output_dir, _input_urls(cfg))
    return SFTPlan(
        job_type=SFT_JOB_TYPE,
        placement=PlacementPlan(
            nnodes=nnodes,
            n_gpus_per_node=per_node,
            world_size=nnodes * per_node,
            device=trainer.device or "auto",
            dp_size=max(nnodes * per_node // sp, 1),
            sp_size=sp,
            nccl_timeout=DEFAULT_NCCL_TIMEOUT,
        ),
        paths=paths,
        data=_data(cfg),
        model=model_section(cfg.model),
        use_remove_padding=cfg.model.use_remove_padding,
        optim=optim_section(cfg.optim),
        grad_clip=float(cfg.optim.clip_grad),
        fsdp_config=fsdp_section(cfg.engine),
        checkpoint=checkpoint_section(cfg.checkpoint),
        trainer=SFTTrainerPlan(
            total_epochs=trainer.total_epochs,
            total_training_steps=trainer.total_training_steps or 0,
            project_name=trainer.project_name,
            experiment_name=trainer.experiment_name,
            loggers=trainer.loggers,
            save_freq=trainer.save_freq,
            test_freq=trainer.test_freq,
            resume_mode=trainer.resume_mode,
            resume_from_path=trainer.resume_from_path or "",
            max_ckpt_to_keep=trainer.max_ckpt_to_keep or 0,
            seed=trainer.seed,
            checkpoint_mirror=checkpoint_mirror(trainer.default_hdfs_dir, paths),
        ),
        source=json.loads(cfg.model_dump_json()),
    )


def _paths(checkpoint_root: str, af_output_dir: str | None, inputs: list[str]) -> PathsPlan:
    checkpoint_dir = os.path.abspath(checkpoint_root)
    output_dir = (
        os.path.abspath(output_location(af_output_dir)) if af_output_dir else checkpoint_dir
    )
    return paths_section(checkpoint_dir, output_dir, inputs, output_url(af_output_dir))


def _input_urls(cfg: SFTConfig) -> list[str]:
    model = cfg.model
    return [
        model.path,
        model.tokenizer_path or "",
        *file_list(cfg.data.train_files),
        *file_list(cfg.data.val_files),
        resume_input(cfg.trainer.resume_mode, cfg.trainer.resume_from_path),
    ]


def _data(cfg: SFTConfig) -> SFTDataPlan:
    data = cfg.data
    return SFTDataPlan(
        tokenizer=cfg.model.tokenizer_path or cfg.model.path,
        train_files=file_list(data.train_files),
        val_files=file_list(data.val_files),
        train_max_samples=data.train_max_samples,
        val_max_samples=data.val_max_samples,
        messages_key=data.messages_key,
        max_length=data.max_length,
        truncation=data.truncation,
        train_batch_size=data.train_batch_size,
        micro_batch_size_per_gpu=data.micro_batch_size_per_gpu,
        use_dynamic_bsz=data.use_dynamic_bsz,
        max_token_len_per_gpu=data.max_token_len_per_gpu,
        apply_chat_template_kwargs=dict(data.apply_chat_template_kwargs),
    )
