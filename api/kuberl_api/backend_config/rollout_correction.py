"""``algorithm.rollout_correction.*``: importance sampling and rejection between the rollout
engine's log-probs and the trainer's (verl 0.9.1's ``RolloutCorrectionConfig``).

The thresholds are verl's strings or numbers; `is_bounds` and `rs_bounds` read them the way verl
0.9.1's ``rollout_corr_helper`` does, and the schema refuses what verl would refuse at run time.
"""

from typing import Literal

from pydantic import Field, model_validator

from kuberl_api.base import ConfigModel

RolloutISLevel = Literal["token", "sequence"]
RejectionOption = Literal[
    "token_k1",
    "token_k2",
    "token_k3",
    "seq_sum_k1",
    "seq_sum_k2",
    "seq_sum_k3",
    "seq_mean_k1",
    "seq_mean_k2",
    "seq_mean_k3",
    "seq_max_k2",
    "seq_max_k3",
]
REJECTION_OPTIONS: tuple[str, ...] = RejectionOption.__args__  # type: ignore[attr-defined]
BypassLossType = Literal["ppo_clip", "reinforce"]


class RolloutCorrectionConfig(ConfigModel):
    rollout_is: RolloutISLevel | None = Field(
        None, description="IS weights per token or per sequence; null: none (metrics only)."
    )
    rollout_is_threshold: float | str = Field(
        2.0, description="Upper bound (truncate), or 'lower_upper' (zero weights outside)."
    )
    rollout_is_batch_normalize: bool = False
    rollout_rs: RejectionOption | str | None = Field(
        None, description="Rejection options, comma separated (all must pass); null: none."
    )
    rollout_rs_threshold: float | str | None = Field(
        None, description="One threshold per option (comma separated) or one for all."
    )
    bypass_mode: bool = Field(
        False, description="π_old = the rollout's log-probs; no old-log-prob pass."
    )
    loss_type: BypassLossType = Field(
        "ppo_clip", description="Bypass mode's loss: PPO clip, or REINFORCE with IS weights."
    )

    @model_validator(mode="after")
    def _thresholds_parse(self) -> "RolloutCorrectionConfig":
        if self.rollout_is is not None:
            is_bounds(self.rollout_is_threshold)
        if self.rollout_rs is not None:
            rs_bounds(self.rollout_rs, self.rollout_rs_threshold)
        return self


def _number(text: str, key: str, whole: object) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(
            f"{key}={whole!r}: {text!r} is not a number; write a number such as 2.0"
        ) from None


def is_bounds(spec: float | str) -> tuple[float, float]:
    """(upper, lower) of ``rollout_is_threshold``; lower 0.0: truncation at upper (TIS), else
    weights outside [lower, upper] are zeroed (IcePop, written 'lower_upper')."""
    key = "rollout_is_threshold"
    if isinstance(spec, bool):
        raise ValueError(f"{key}={spec!r}: write a number (2.0) or 'lower_upper' ('0.5_5.0')")
    lower = 0.0
    text = spec.strip() if isinstance(spec, str) else ""
    if "_" in text:
        low, high = text.split("_", 1)
        lower, upper = _number(low, key, spec), _number(high, key, spec)
        if lower <= 0:
            raise ValueError(f"{key}={spec!r}: the lower bound must be positive")
    else:
        upper = _number(text, key, spec) if isinstance(spec, str) else float(spec)
    if upper <= 0:
        raise ValueError(f"{key}={spec!r}: the upper bound must be positive")
    if lower > upper:
        raise ValueError(f"{key}={spec!r}: the lower bound must not exceed the upper")
    return upper, lower


def rs_bounds(options: str, spec: float | str | None) -> list[tuple[str, float, float]]:
    """(option, lower, upper) per distinct option of ``rollout_rs``, in order. k1 options take
    ratio bounds 'lower_upper' (one number: lower = 1 / upper); k2/k3 take an upper bound only
    (lower 0.0)."""
    names = list(dict.fromkeys(o.strip() for o in options.split(",") if o.strip()))
    unknown = [n for n in names if n not in REJECTION_OPTIONS]
    if not names or unknown:
        raise ValueError(
            f"rollout_rs={options!r}: {unknown or 'no option'} — use one or more of "
            f"{', '.join(REJECTION_OPTIONS)}, comma separated"
        )
    if spec is None:
        raise ValueError(
            f"rollout_rs={options!r} needs rollout_rs_threshold (one value per option or one "
            "for all, e.g. '0.5_2.0' for k1 options, 2.0 for k2/k3)"
        )
    parts = [str(spec)] if not isinstance(spec, str) else [p.strip() for p in spec.split(",")]
    parts = [p for p in parts if p]
    if len(parts) == 1:
        parts = parts * len(names)
    if len(parts) != len(names):
        raise ValueError(
            f"rollout_rs_threshold={spec!r}: {len(parts)} values for {len(names)} rollout_rs "
            "options; give one per option or one for all"
        )
    return [_option_bounds(name, part, spec) for name, part in zip(names, parts, strict=True)]


def _option_bounds(name: str, part: str, spec: object) -> tuple[str, float, float]:
    key = "rollout_rs_threshold"
    if name.endswith("k1"):
        if "_" in part:
            low, high = part.split("_", 1)
            lower, upper = _number(low, key, spec), _number(high, key, spec)
        else:
            upper = _number(part, key, spec)
            lower = 1.0 / upper if upper > 0 else 0.0
        if lower <= 0 or upper <= 0 or lower > upper:
            raise ValueError(
                f"{key}={spec!r}: {name} needs positive ratio bounds lower <= upper, got {part!r}"
            )
        return name, lower, upper
    if "_" in part:
        raise ValueError(f"{key}={spec!r}: {name} takes one upper bound, not {part!r}")
    upper = _number(part, key, spec)
    if upper <= 0:
        raise ValueError(f"{key}={spec!r}: {name}'s bound must be positive, got {part!r}")
    return name, 0.0, upper
