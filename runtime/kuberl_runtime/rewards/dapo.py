"""verl's `dapo` reward manager: the naive manager's scores plus DAPO's overlong penalty.

verl 0.9.1 reads `reward_model.reward_kwargs.overlong_buffer_cfg.{enable, len, penalty_factor,
log}` and `reward_model.reward_kwargs.max_resp_len`. With the buffer enabled, a response of L valid
tokens gets min(−(L − (max_resp_len − len)) / len · penalty_factor, 0) added to its score: zero up
to max_resp_len − len tokens, then falling linearly to −penalty_factor at max_resp_len. Extra
info: a scorer returning a number is recorded as `acc`; with `log`, `overlong_reward` and
`overlong` (penalised or not) per response.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kuberl_runtime.rewards.errors import RewardError
from kuberl_runtime.rewards.output import RewardOutput


@dataclass(frozen=True)
class OverlongBuffer:
    enable: bool = False
    len: int = 0
    penalty_factor: float = 1.0
    log: bool = False

    def check(self, max_resp_len: int | None) -> None:
        """verl's constructor checks, as errors that say what to set."""
        if not self.enable:
            return
        if max_resp_len is None:
            raise RewardError(
                "reward_model.reward_kwargs.max_resp_len must be set when "
                "overlong_buffer_cfg.enable is true (verl's DAPO recipe sets it to "
                "data.max_response_length)"
            )
        if self.len <= 0:
            raise RewardError(
                f"overlong_buffer_cfg.len must be positive with the penalty on, got {self.len}; "
                "set enable: false to turn the penalty off"
            )
        if max_resp_len < self.len:
            raise RewardError(
                f"max_resp_len ({max_resp_len}) must be at least overlong_buffer_cfg.len "
                f"({self.len})"
            )


@dataclass(frozen=True)
class Dapo:
    """The dapo manager's settings (`reward_model.reward_kwargs`)."""

    buffer: OverlongBuffer
    max_resp_len: int | None


def overlong_reward(response_length: int, max_resp_len: int, buffer: OverlongBuffer) -> float:
    """In float32, as verl: its response length is an int64 tensor, so the division yields
    float32 and penalty_factor is rounded to float32 before the product (a factor below float32's
    range, or a product that underflows, gives −0.0: no penalty, `overlong` False)."""
    exceed = response_length - (max_resp_len - buffer.len)
    penalty = _f32(_f32(_f32(-exceed) / _f32(buffer.len)) * _f32(buffer.penalty_factor))
    return min(penalty, 0.0)


def _f32(x: float) -> float:
    """`x` rounded to the nearest float32 (±inf beyond its range). One float32 operation equals
    the float64 one rounded so: float64 holds every product and quotient of two float32s well
    enough (53 ≥ 2·24 + 2 bits)."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def dapo_scores(
    output: RewardOutput,
    numeric: Sequence[bool],
    response_lengths: Sequence[int],
    buffer: OverlongBuffer,
    max_resp_len: int | None,
) -> RewardOutput:
    """The naive manager's output → DAPO's: `acc` for numeric results, then the penalty.

    numeric[i]: the scorer returned a number (not a dict) for response i.
    """
    buffer.check(max_resp_len)
    extra = {key: list(values) for key, values in output.extra_info.items()}
    if all(numeric):
        extra["acc"] = list(output.scores)
    elif not any(numeric):
        extra["score"] = list(output.scores)  # verl records every key of a dict, score included
    else:
        raise RewardError(
            "the reward function returned numbers for some responses and dicts for others; "
            "the dapo reward manager needs one kind"
        )
    scores = list(output.scores)
    if buffer.enable:
        assert max_resp_len is not None
        penalties = [overlong_reward(n, max_resp_len, buffer) for n in response_lengths]
        scores = [s + p for s, p in zip(scores, penalties, strict=True)]
        if buffer.log:
            extra["overlong_reward"] = penalties
            extra["overlong"] = [p < 0 for p in penalties]
    return RewardOutput(scores, extra)
