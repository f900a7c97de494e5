"""The dapo reward manager's settings: what verl 0.9.1's DAPORewardManager asserts, as problems.

The overlong buffer is read by the dapo manager only; switched on under another manager it would
do nothing, so it is refused there instead of ignored.
"""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.validation.problems import Problem, join_path


def check_reward(cfg: BackendConfig, bc: str) -> list[Problem]:
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
