"""Rules tying the config to the devices it runs on: world size, TP, SP, pools, kernel limits."""

import posixpath

from kuberl_api.accelerators import NO_ACCELERATOR, AcceleratorKind, kind_of_resource
from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.effective import accelerator_pools
from kuberl_api.job import RLTrainingJobSpec
from kuberl_api.storage import output_location
from kuberl_api.validation.problems import Problem, join_path

_PARALLEL_ROLLOUTS = ("vllm", "sglang")


def check_parallelism(cfg: BackendConfig, bc: str) -> list[Problem]:
    arr = cfg.actor_rollout_ref
    rollout, actor = arr.rollout, arr.actor
    per_node = cfg.trainer.n_gpus_per_node
    world = cfg.trainer.nnodes * per_node
    problems = []
    tp = rollout.tensor_model_parallel_size
    tp_path = join_path(bc, "actor_rollout_ref", "rollout", "tensor_model_parallel_size")
    if rollout.name in _PARALLEL_ROLLOUTS and tp > per_node:
        problems.append(
            Problem(
                tp_path,
                f"tensor parallel size {tp} exceeds the {per_node} accelerators per node",
                f"use at most {per_node}",
                tp,
            )
        )
    elif rollout.name in _PARALLEL_ROLLOUTS and world % tp:
        problems.append(
            Problem(
                tp_path,
                f"world size {world} is not a multiple of tensor parallel size {tp}",
                "use a divisor of nnodes x n_gpus_per_node",
                tp,
            )
        )
    sp = actor.ulysses_sequence_parallel_size
    sp_path = join_path(bc, "actor_rollout_ref", "actor", "ulysses_sequence_parallel_size")
    if sp > 1 and not actor.use_remove_padding:
        problems.append(
            Problem(
                sp_path,
                "sequence parallelism needs packed sequences",
                "set actor_rollout_ref.model.use_remove_padding: true",
                sp,
            )
        )
    if world % sp:
        problems.append(
            Problem(
                sp_path,
                f"world size {world} is not a multiple of {sp}",
                "use a divisor of nnodes x n_gpus_per_node",
                sp,
            )
        )
    longest = (rollout.prompt_length or 0) + (rollout.response_length or 0)
    if (
        rollout.name == "vllm"
        and not rollout.enable_chunked_prefill
        and (rollout.max_num_batched_tokens < longest)
    ):
        problems.append(
            Problem(
                join_path(bc, "actor_rollout_ref", "rollout", "max_num_batched_tokens"),
                f"shorter than one sequence ({longest} tokens) with chunked prefill off",
                f"set it to at least {longest} or enable_chunked_prefill: true",
                rollout.max_num_batched_tokens,
            )
        )
    return problems


def check_checkpoint_dir(
    cfg: BackendConfig | SFTConfig, bc: str, af_output_dir: str
) -> list[Problem]:
    assert cfg.trainer.default_local_dir is not None, "placed under af_output_dir at validation"
    local_dir = posixpath.normpath(cfg.trainer.default_local_dir)
    root = posixpath.normpath(output_location(af_output_dir))
    if local_dir == root or local_dir.startswith(root + "/"):
        return []
    return [
        Problem(
            join_path(bc, "trainer", "default_local_dir"),
            "checkpoints must live under af_output_dir so a restarted attempt finds them",
            f"use a path under {af_output_dir} or a relative one",
            local_dir,
        )
    ]


def check_pools(spec: RLTrainingJobSpec, prefix: str) -> list[Problem]:
    pools = spec.worker_pools
    problems = []
    names = [p.name for p in pools]
    for i, name in enumerate(names):
        if name in names[:i]:
            problems.append(
                Problem(
                    join_path(prefix, "workerPools", i, "name"),
                    "duplicate pool name",
                    "give every pool its own name",
                    name,
                )
            )
    accelerated = accelerator_pools(pools)
    kinds = {p.accelerator.type for p in accelerated}
    if len(kinds) > 1:
        problems.append(
            Problem(
                join_path(prefix, "workerPools"),
                "pools mix accelerator types " + ", ".join(sorted(kinds)),
                "run one accelerator type per job",
            )
        )
    per_node = {p.accelerator.per_node for p in accelerated}
    for i, pool in enumerate(pools):
        if pool.accelerator.type != NO_ACCELERATOR and pool.accelerator.per_node == 0:
            problems.append(
                Problem(
                    join_path(prefix, "workerPools", i, "accelerator", "perNode"),
                    "an accelerator pool needs at least one accelerator per node",
                    "set perNode, e.g. 8",
                    0,
                )
            )
    if len(per_node) > 1:
        problems.append(
            Problem(
                join_path(prefix, "workerPools"),
                "pools differ in accelerators per node: " + ", ".join(map(str, sorted(per_node))),
                "use the same perNode in every accelerator pool",
            )
        )
    problems += _trainer_matches_pools(spec, prefix)
    if len(kinds) == 1 and spec.backend_config is not None:
        kind = kind_of_resource(next(iter(kinds)))
        if not kind.cuda_kernels:
            problems += _cuda_only_kernels(spec, kind, join_path(prefix, "backend_config"))
    return problems


def _trainer_matches_pools(spec: RLTrainingJobSpec, prefix: str) -> list[Problem]:
    """The trainer's placement as written (backend_config or sft_config) against the pools."""
    accelerated = accelerator_pools(spec.worker_pools)
    written = spec.training_config.trainer
    bc_trainer = join_path(prefix, spec.training_config_key, "trainer")
    problems = []
    if accelerated:
        nodes = sum(p.nodes for p in accelerated)
        per_node = accelerated[0].accelerator.per_node
        device = kind_of_resource(accelerated[0].accelerator.type).device
        expected = {"nnodes": nodes, "n_gpus_per_node": per_node, "device": device}
        for key, value in expected.items():
            if getattr(written, key) not in (None, value):
                problems.append(
                    Problem(
                        join_path(bc_trainer, key),
                        f"does not match the worker pools ({value})",
                        f"remove it (it is derived) or set it to {value}",
                        getattr(written, key),
                    )
                )
    return problems


def _cuda_only_kernels(spec: RLTrainingJobSpec, kind: AcceleratorKind, bc: str) -> list[Problem]:
    """SGLang and Liger run on CUDA only: refused on an accelerator without CUDA kernels."""
    assert spec.backend_config is not None
    arr = spec.backend_config.actor_rollout_ref
    problems = []
    if arr.rollout.name == "sglang":
        problems.append(
            Problem(
                join_path(bc, "actor_rollout_ref", "rollout", "name"),
                "SGLang rollout is CUDA-only",
                f"use vllm ({kind.vllm_package}) on {kind.label}",
                "sglang",
            )
        )
    if arr.model.use_liger:
        problems.append(
            Problem(
                join_path(bc, "actor_rollout_ref", "model", "use_liger"),
                "Liger kernels are CUDA-only",
                f"set use_liger: false on {kind.label}",
                True,
            )
        )
    return problems
