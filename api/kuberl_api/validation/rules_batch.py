"""verl's batch-size rules (reference §2): every rank gets whole rows and whole micro-batches.

B = data.train_batch_size prompts, n = rollout.n, W = nnodes x n_gpus_per_node, DP = W / SP.
"""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.validation.problems import Problem, join_path


def check_batch_sizes(cfg: BackendConfig, bc: str) -> list[Problem]:
    arr = cfg.actor_rollout_ref
    actor = arr.actor
    world = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
    dp = world // actor.ulysses_sequence_parallel_size or 1
    batch, n = cfg.data.train_batch_size, arr.rollout.n
    problems: list[Problem] = []
    if not actor.use_dynamic_bsz and (batch * n) % world:
        problems.append(
            Problem(
                join_path(bc, "data", "train_batch_size"),
                f"train_batch_size x rollout.n = {batch} x {n} = {batch * n} responses cannot be "
                f"split evenly over {world} ranks (nnodes x n_gpus_per_node)",
                f"use a train_batch_size whose product with rollout.n is a multiple of {world}",
                batch,
            )
        )
    problems += _mini_batch(
        "actor_rollout_ref.actor",
        actor.ppo_mini_batch_size,
        actor.ppo_micro_batch_size_per_gpu,
        actor.use_dynamic_bsz,
        batch=batch,
        n=n,
        dp=dp,
        bc=bc,
    )
    if cfg.needs_critic:
        critic = cfg.critic
        problems += _mini_batch(
            "critic",
            critic.ppo_mini_batch_size,
            critic.ppo_micro_batch_size_per_gpu,
            bool(critic.use_dynamic_bsz),
            batch=batch,
            n=n,
            dp=dp,  # the critic runs in the actor's (dp, sp) layout
            bc=bc,
        )
    problems += _forward_micro_batches(cfg, bc)
    problems += _on_policy_shortcut(cfg, bc)
    problems += _token_budgets(cfg, bc)
    return problems


def _mini_batch(
    role: str,
    mini: int,
    micro: int | None,
    dynamic: bool,
    *,
    batch: int,
    n: int,
    dp: int,
    bc: str,
) -> list[Problem]:
    where = join_path(bc, *role.split("."))
    if mini > batch:
        return [
            Problem(
                join_path(where, "ppo_mini_batch_size"),
                f"ppo_mini_batch_size {mini} is larger than data.train_batch_size {batch}",
                f"set it to at most {batch} (a divisor of it, e.g. {batch})",
                mini,
            )
        ]
    if (mini * n) % dp or mini * n < dp:
        return [
            Problem(
                join_path(where, "ppo_mini_batch_size"),
                f"ppo_mini_batch_size x rollout.n = {mini * n} responses cannot be split evenly "
                f"over {dp} data-parallel ranks",
                f"use a ppo_mini_batch_size whose product with rollout.n is a multiple of {dp}",
                mini,
            )
        ]
    if dynamic:
        return []
    if micro is None:
        return [
            Problem(
                join_path(where, "ppo_micro_batch_size_per_gpu"),
                "required unless use_dynamic_bsz is true",
                "set ppo_micro_batch_size_per_gpu (responses per forward/backward per rank)",
            )
        ]
    per_rank = mini * n // dp
    # A micro batch at least the rank's mini-batch is one micro-batch of it (verl 0.9.1 splits
    # the rank's rows by the micro size and asserts nothing more).
    if micro < per_rank and per_rank % micro:
        return [
            Problem(
                join_path(where, "ppo_micro_batch_size_per_gpu"),
                f"each rank's mini-batch of {per_rank} responses (ppo_mini_batch_size x "
                f"rollout.n / {dp} ranks) is not a multiple of the micro batch {micro}",
                f"use a divisor of {per_rank}",
                micro,
            )
        ]
    return []


def _on_policy_shortcut(cfg: BackendConfig, bc: str) -> list[Problem]:
    """actor.on_policy_shortcut (kuberl extension) holds only for an exactly on-policy update:
    one epoch over one mini-batch, whose π_old is the policy the update starts from, and no
    consumer of π_old before the update (KL in reward)."""
    actor = cfg.actor_rollout_ref.actor
    if not actor.on_policy_shortcut:
        return []
    reasons = []
    if actor.ppo_epochs != 1:
        reasons.append(f"actor.ppo_epochs is {actor.ppo_epochs} (needs 1)")
    if actor.ppo_mini_batch_size < cfg.data.train_batch_size:
        reasons.append(
            f"actor.ppo_mini_batch_size {actor.ppo_mini_batch_size} < data.train_batch_size "
            f"{cfg.data.train_batch_size} (needs one mini-batch per step)"
        )
    if cfg.algorithm.use_kl_in_reward:
        reasons.append("algorithm.use_kl_in_reward is true (its KL needs π_old before the update)")
    if not reasons:
        return []
    return [
        Problem(
            join_path(bc, "actor_rollout_ref", "actor", "on_policy_shortcut"),
            "the update is not exactly on-policy: " + "; ".join(reasons),
            "set on_policy_shortcut to false, or make the update on-policy as listed",
            True,
        )
    ]


def _forward_micro_batches(cfg: BackendConfig, bc: str) -> list[Problem]:
    """Forward-only passes (old/ref log-probs) need a chunk size unless token budgets are on."""
    arr = cfg.actor_rollout_ref
    needed = [("actor_rollout_ref.rollout", arr.rollout)]
    if cfg.needs_reference:
        needed.append(("actor_rollout_ref.ref", arr.ref))
    problems = []
    for role, node in needed:
        if not node.log_prob_use_dynamic_bsz and node.log_prob_micro_batch_size_per_gpu is None:
            why = "the reference policy" if role.endswith("ref") else "old log-probs"
            problems.append(
                Problem(
                    join_path(bc, *role.split("."), "log_prob_micro_batch_size_per_gpu"),
                    f"required to compute {why} unless log_prob_use_dynamic_bsz is true",
                    "set log_prob_micro_batch_size_per_gpu (responses per forward per rank)",
                )
            )
    return problems


def _token_budgets(cfg: BackendConfig, bc: str) -> list[Problem]:
    actor = cfg.actor_rollout_ref.actor
    longest = cfg.data.max_prompt_length + cfg.data.max_response_length
    budget = actor.ppo_max_token_len_per_gpu * actor.ulysses_sequence_parallel_size
    if actor.use_dynamic_bsz and budget < longest:
        return [
            Problem(
                join_path(bc, "actor_rollout_ref", "actor", "ppo_max_token_len_per_gpu"),
                f"token budget {budget} is shorter than one full sequence "
                f"(max_prompt_length + max_response_length = {longest})",
                f"set it to at least {longest}",
                actor.ppo_max_token_len_per_gpu,
            )
        ]
    return []
