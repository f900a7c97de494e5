"""Reward settings verl 0.9.1 checks or kuberl cannot honour, as problems.

The overlong buffer is read by the dapo manager only (verl's DAPORewardManager asserts its
settings); switched on under another manager it would do nothing, so it is refused there instead
of ignored.

A reward model is generative in verl 0.9.1 when ``custom_reward_function.path`` is set beside
``reward_model.enable``: its reward loop then calls the user's function, which queries the served
model (``reward_model.rollout``). Without a function the model is discriminative (a sequence
classifier scoring prompt+response), which kuberl runs itself; ``rollout.name`` (verl needs it
for any served reward model) then has no effect. The generative case is served by a vLLM engine
on each rank (``plan/reward_judge.py``): other engines, a separate resource pool and tensor
parallelism for the judge are refused.
"""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.plan.reward_judge import JUDGE_DEFAULTS, is_generative
from kuberl_api.validation.problems import Problem, join_path


def check_reward(cfg: BackendConfig, bc: str) -> list[Problem]:
    return _check_generative(cfg, bc) + _check_overlong_buffer(cfg, bc)


def _check_generative(cfg: BackendConfig, bc: str) -> list[Problem]:
    rm, function = cfg.reward_model, cfg.custom_reward_function.path
    rollout = rm.rollout or {}
    if not is_generative(rm.enable, function, rollout):
        return []
    at = join_path(bc, "reward_model")
    problems = []
    if rollout.get("name") != "vllm":
        problems.append(
            Problem(
                join_path(at, "rollout", "name"),
                "kuberl serves a generative reward model (the judge) with vLLM only",
                "set reward_model.rollout.name: vllm",
                rollout.get("name"),
            )
        )
    if not rm.model.path:
        problems.append(
            Problem(
                join_path(at, "model_path"),
                "a generative reward model needs the judge model to serve",
                "set reward.reward_model.model_path (or reward_model.model.path)",
                None,
            )
        )
    if rm.enable_resource_pool:
        problems.append(
            Problem(
                join_path(at, "enable_resource_pool"),
                "kuberl runs the judge colocated with the training ranks (one engine per rank); "
                "a separate reward-model pool is not supported",
                "set enable_resource_pool: false",
                True,
            )
        )
    if rm.reward_manager == "prime":
        problems.append(
            Problem(
                join_path(at, "reward_manager"),
                "verl's prime manager scores in forked processes and passes no judge address",
                "use the naive, batch, dapo or gdpo reward manager with a generative reward model",
                "prime",
            )
        )
    tp = rollout.get("tensor_model_parallel_size", JUDGE_DEFAULTS["tensor_model_parallel_size"])
    if tp != 1:
        problems.append(
            Problem(
                join_path(at, "rollout", "tensor_model_parallel_size"),
                "the judge engine runs one per rank (no tensor parallelism); verl's default is 2",
                "set reward_model.rollout.tensor_model_parallel_size: 1",
                tp,
            )
        )
    return problems


def _check_overlong_buffer(cfg: BackendConfig, bc: str) -> list[Problem]:
    rm = cfg.reward_model
    kwargs = join_path(bc, "reward_model", "reward_kwargs")
    buffer_path = join_path(kwargs, "overlong_buffer_cfg")
    buffer, max_resp_len = rm.reward_kwargs.overlong_buffer_cfg, rm.reward_kwargs.max_resp_len
    if not buffer.enable:
        return []
    if rm.reward_manager != "dapo":
        return [
            Problem(
                join_path(buffer_path, "enable"),
                f"only the dapo reward manager reads it (reward_manager is {rm.reward_manager})",
                "set reward_model.reward_manager: dapo, or overlong_buffer_cfg.enable: false",
                True,
            )
        ]
    problems = []
    if max_resp_len is None:
        problems.append(
            Problem(
                join_path(kwargs, "max_resp_len"),
                "must be set when overlong_buffer_cfg.enable is true",
                "set it to data.max_response_length, as verl's DAPO recipe does",
                None,
            )
        )
    if buffer.len <= 0:
        problems.append(
            Problem(
                join_path(buffer_path, "len"),
                "must be positive with the overlong penalty on",
                "set the number of tokens the penalty ramps over, or enable: false",
                buffer.len,
            )
        )
    elif max_resp_len is not None and max_resp_len < buffer.len:
        problems.append(
            Problem(
                join_path(kwargs, "max_resp_len"),
                f"is shorter than overlong_buffer_cfg.len ({buffer.len})",
                "set max_resp_len >= overlong_buffer_cfg.len",
                max_resp_len,
            )
        )
    return problems
