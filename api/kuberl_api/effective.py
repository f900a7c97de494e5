"""The effective backend_config of a job: what the runtime really runs.

Fills what a job's placement decides (world size, device, checkpoint directory) and turns
deprecated keys into their replacements, so code below this edge reads one typed value.
"""

import posixpath

from kuberl_api.accelerators import NO_ACCELERATOR, kind_of_resource
from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.sft import SFTTrainerConfig
from kuberl_api.backend_config.trainer import TrainerConfig
from kuberl_api.job import EngineKwargs
from kuberl_api.platform import WorkerPool
from kuberl_api.storage import output_location

VERL_DEFAULT_GPUS_PER_NODE = 8


def accelerator_pools(pools: list[WorkerPool]) -> list[WorkerPool]:
    return [p for p in pools if p.accelerator.type != NO_ACCELERATOR]


def build_effective_backend_config(
    backend: BackendConfig,
    *,
    af_output_dir: str | None = None,
    pools: list[WorkerPool] | None = None,
    engine_kwargs: EngineKwargs | None = None,
) -> BackendConfig:
    cfg = backend.model_copy(deep=True)
    trainer = cfg.trainer
    if pools:
        place_on_pools(trainer, pools)
    trainer.nnodes = trainer.nnodes or 1
    trainer.n_gpus_per_node = trainer.n_gpus_per_node or VERL_DEFAULT_GPUS_PER_NODE
    # No device written and no pool to derive it from: the runtime takes what its machine has.
    if af_output_dir:
        # An af_output_dir URL: its local staging directory (uploaded to the URL).
        local = output_location(af_output_dir)
        trainer.default_local_dir = posixpath.join(local, trainer.default_local_dir)
    if engine_kwargs:
        vllm = cfg.actor_rollout_ref.rollout.engine_kwargs.vllm
        vllm.update(engine_kwargs.vllm)
    _apply_deprecated_keys(cfg, world_size=trainer.nnodes * trainer.n_gpus_per_node)
    return cfg


def place_on_pools(trainer: TrainerConfig | SFTTrainerConfig, pools: list[WorkerPool]) -> None:
    """Placement left unset follows the worker pools (the PPO and the SFT trainer alike)."""
    accelerated = accelerator_pools(pools)
    if accelerated:
        trainer.nnodes = trainer.nnodes or sum(p.nodes for p in accelerated)
        trainer.n_gpus_per_node = trainer.n_gpus_per_node or accelerated[0].accelerator.per_node
        trainer.device = trainer.device or kind_of_resource(accelerated[0].accelerator.type).device
    else:
        trainer.nnodes = trainer.nnodes or sum(p.nodes for p in pools)
        trainer.n_gpus_per_node = trainer.n_gpus_per_node or 1
        trainer.device = trainer.device or "cpu"


def _apply_deprecated_keys(cfg: BackendConfig, world_size: int) -> None:
    """verl's global micro batch sizes become per-GPU ones: global // data-parallel size."""
    arr = cfg.actor_rollout_ref
    actor, ref, rollout, critic = arr.actor, arr.ref, arr.rollout, cfg.critic
    dp = max(world_size // actor.ulysses_sequence_parallel_size, 1)
    if actor.ppo_micro_batch_size and actor.ppo_micro_batch_size_per_gpu is None:
        actor.ppo_micro_batch_size_per_gpu = max(actor.ppo_micro_batch_size // dp, 1)
    if ref.log_prob_micro_batch_size and ref.log_prob_micro_batch_size_per_gpu is None:
        ref.log_prob_micro_batch_size_per_gpu = max(ref.log_prob_micro_batch_size // dp, 1)
    if rollout.log_prob_micro_batch_size and rollout.log_prob_micro_batch_size_per_gpu is None:
        rollout.log_prob_micro_batch_size_per_gpu = max(rollout.log_prob_micro_batch_size // dp, 1)
    if critic.ppo_micro_batch_size and critic.ppo_micro_batch_size_per_gpu is None:
        critic.ppo_micro_batch_size_per_gpu = max(critic.ppo_micro_batch_size // dp, 1)
    if critic.forward_micro_batch_size and critic.forward_micro_batch_size_per_gpu is None:
        critic.forward_micro_batch_size_per_gpu = max(critic.forward_micro_batch_size // dp, 1)
    if critic.forward_micro_batch_size_per_gpu is None:
        critic.forward_micro_batch_size_per_gpu = critic.ppo_micro_batch_size_per_gpu
    rm = cfg.reward_model
    if rm.micro_batch_size and rm.micro_batch_size_per_gpu is None:
        rm.micro_batch_size_per_gpu = max(rm.micro_batch_size // dp, 1)
    if cfg.trainer.remove_previous_ckpt_in_save and cfg.trainer.max_actor_ckpt_to_keep is None:
        cfg.trainer.max_actor_ckpt_to_keep = 1
        cfg.trainer.max_critic_ckpt_to_keep = 1
