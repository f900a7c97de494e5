"""Fates of ``trainer.*``, ``ray_kwargs`` and the ModelArts envelope."""

from kuberl_api.keys.entry import ENVELOPE, honoured, no_effect, refused
from kuberl_api.keys.where import (
    BALANCE,
    COMPONENTS,
    DEPRECATED,
    DEVICE,
    LAUNCH_LOCAL,
    LOOP,
    PLAN,
    RUN_CONFIG,
    VLLM,
)

T = "trainer."
LOOP_KEYS = [
    "save_freq",
    "test_freq",
    "val_before_train",
    "val_only",
    "critic_warmup",
    "resume_mode",
    "resume_from_path",
    "project_name",
    "experiment_name",
    "seed",
]
LOGGERS = ("console", "tensorboard", "wandb", "mlflow", "swanlab", "file")
NO_DUMP = "dumping generations is not supported yet; remove it"

KEYS = [
    honoured(T + "balance_batch", BALANCE),
    honoured(T + "total_epochs", COMPONENTS),
    honoured(T + "total_training_steps", COMPONENTS),
    *[honoured(T + k, LOOP) for k in LOOP_KEYS],
    honoured(
        T + "logger",
        LOOP,
        accepts=LOGGERS,
        fix=f"kuberl logs to {', '.join(LOGGERS)}; remove the others",
    ),
    refused(T + "log_val_generations", NO_DUMP),
    refused(T + "rollout_data_dir", NO_DUMP),
    refused(T + "validation_data_dir", NO_DUMP),
    honoured(T + "nnodes", LAUNCH_LOCAL),
    honoured(T + "n_gpus_per_node", LAUNCH_LOCAL),
    honoured(T + "device", DEVICE),
    honoured(T + "default_local_dir", PLAN),
    honoured(T + "max_actor_ckpt_to_keep", PLAN),
    honoured(T + "max_critic_ckpt_to_keep", PLAN),
    honoured(T + "default_hdfs_dir", PLAN),
    refused(T + "del_local_ckpt_after_load", "not supported; remove it"),
    honoured(T + "remove_previous_ckpt_in_save", DEPRECATED),
    no_effect(T + "use_legacy_worker_impl", "kuberl has one worker implementation"),
    no_effect("ray_kwargs", "the operator's RayCluster decides Ray's resources"),
    honoured(ENVELOPE + "af_output_dir", RUN_CONFIG),
    honoured(ENVELOPE + "engine_kwargs.vllm", VLLM),
]
