"""The multi-turn length budget `kuberl plan` reports.

A multi-turn trajectory (every assistant turn, tool response and template token after the
prompt) is capped at ``rollout.response_length`` (`rollout/multi_turn.py`: a turn is generated
into what is left, a tool context that does not fit ends the row). So the longest trajectory
is ``prompt_length + response_length`` tokens, which validation holds within ``max_model_len``,
and the dry run's full-width rows (`from_plan.dry_run_input`) are that trajectory: its memory
plan covers every turn. What the budget adds: one round of tool responses can take up to
``max_parallel_calls x (max_tool_response_length + the truncation mark)`` characters (about as
many tokens in ASCII text, more in other scripts), and a job whose round can fill the whole
budget is warned: its trajectories would end before the policy answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kuberl_api.plan import RunPlan

TRUNCATION_MARK_CHARS = len("...(truncated)...")


@dataclass(frozen=True)
class TurnBudget:
    prompt_length: int
    response_length: int
    """The whole trajectory's budget (all turns)."""
    max_model_len: int
    longest_sequence: int
    """prompt + trajectory: the dry run's row width."""
    tool_round_chars: int
    """One assistant turn's tool responses at most, in characters."""
    max_assistant_turns: int
    max_user_turns: int
    warnings: tuple[str, ...]


def turn_budget(plan: RunPlan) -> TurnBudget | None:
    """The plan's multi-turn budget; None for a single-turn job."""
    rollout = plan.rollout
    turns = rollout.multi_turn
    if not turns.enable:
        return None
    round_chars = turns.max_parallel_calls * (
        turns.max_tool_response_length + TRUNCATION_MARK_CHARS
    )
    warnings = []
    if round_chars >= rollout.response_length:
        warnings.append(
            f"one round of tool responses (max_parallel_calls={turns.max_parallel_calls} x "
            f"max_tool_response_length={turns.max_tool_response_length} characters) can fill "
            f"the whole trajectory budget response_length={rollout.response_length}: raise "
            "response_length or lower max_tool_response_length / max_parallel_calls"
        )
    if turns.max_assistant_turns == 0 and turns.max_user_turns == 0:
        warnings.append(
            "no turn limit (max_assistant_turns and max_user_turns null): trajectories end only "
            f"when the policy answers or response_length={rollout.response_length} is spent"
        )
    return TurnBudget(
        prompt_length=rollout.prompt_length,
        response_length=rollout.response_length,
        max_model_len=rollout.max_model_len,
        longest_sequence=rollout.prompt_length + rollout.response_length,
        tool_round_chars=round_chars,
        max_assistant_turns=turns.max_assistant_turns,
        max_user_turns=turns.max_user_turns,
        warnings=tuple(warnings),
    )


def _limit(turns: int) -> str:
    return "no limit" if turns == 0 else str(turns)


def format_budget(budget: TurnBudget) -> str:
    limit = _limit
    lines = [
        "multi-turn length budget:",
        f"  prompt {budget.prompt_length} + all turns {budget.response_length} "
        f"(response_length) = longest trajectory {budget.longest_sequence} tokens "
        f"<= max_model_len {budget.max_model_len}; the dry run's rows are this long",
        f"  turns: assistant {limit(budget.max_assistant_turns)}, tool "
        f"{limit(budget.max_user_turns)}; one tool round up to {budget.tool_round_chars} "
        "characters",
    ]
    lines += [f"  warning: {w}" for w in budget.warnings]
    return "\n".join(lines)
