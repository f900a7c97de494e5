"""Rules for DAPO dynamic sampling: ``algorithm.filter_groups`` and ``data.gen_batch_size``."""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.validation.problems import Problem, Severity, join_path

# The metrics computed from the summed scores; any other name is a reward extra-info key.
SCORE_METRICS = ("reward", "seq_reward", "seq_final_reward")


def check_filter_groups(cfg: BackendConfig, bc: str) -> list[Problem]:
    options = cfg.algorithm.filter_groups
    problems = _check_gen_batch_size(cfg, bc)
    if not options.enable:
        return problems
    at = join_path(bc, "algorithm", "filter_groups", "metric")
    metric = options.metric
    if not metric:
        return [
            *problems,
            Problem(
                at,
                "filter_groups.enable needs the metric whose equal values drop a group",
                "set it to acc or score (keys of the reward's extra info) or to one of "
                + ", ".join(SCORE_METRICS),
                metric,
            ),
        ]
    if metric == "seq_final_reward" and cfg.algorithm.use_kl_in_reward:
        problems.append(
            Problem(
                at,
                "seq_final_reward with use_kl_in_reward needs the in-reward KL before the filter, "
                "which kuberl (like verl's DAPO trainer) computes only after it",
                "use seq_reward (the scores before the KL penalty) or set use_kl_in_reward: false",
                metric,
            )
        )
    if cfg.reward_model.enable and metric not in SCORE_METRICS:
        problems.append(
            Problem(
                at,
                "a reward model's scores come without extra info, so no response has this key",
                "use one of " + ", ".join(SCORE_METRICS),
                metric,
            )
        )
    if cfg.actor_rollout_ref.rollout.n < 2:
        problems.append(
            Problem(
                join_path(bc, "algorithm", "filter_groups", "enable"),
                "with one response per prompt every group is kept (verl keeps single-response "
                "groups), so the filter drops nothing",
                "set actor_rollout_ref.rollout.n to 2 or more, or remove filter_groups",
                True,
                Severity.WARNING,
            )
        )
    return problems


def _check_gen_batch_size(cfg: BackendConfig, bc: str) -> list[Problem]:
    data = cfg.data
    if data.gen_batch_size in (None, data.train_batch_size) or cfg.algorithm.filter_groups.enable:
        return []
    return [
        Problem(
            join_path(bc, "data", "gen_batch_size"),
            "without algorithm.filter_groups.enable kuberl samples train_batch_size prompts "
            f"per step ({data.train_batch_size})",
            "remove it, set it equal to data.train_batch_size, or enable "
            "algorithm.filter_groups (DAPO's generation batches)",
            data.gen_batch_size,
        )
    ]
