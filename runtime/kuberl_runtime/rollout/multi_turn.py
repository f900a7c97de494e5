"""Multi-turn rollouts with tools (verl's ``tool_agent``) over any rollout engine.

Rows advance together turn by turn: the live rows' contexts (prompt and trajectory so far) go to
the engine as one batch; each row's turn is kept up to and including its EOS (within the row's
remaining budget); a ``tool_agent`` row whose turn holds hermes tool calls runs them (the first
``max_parallel_calls``), and the tool messages, rendered by the chat template, join its context
as tokens the policy did not write. A row leaves the batch when its turn calls no tool, at
``max_assistant_turns`` / ``max_user_turns``, or when the response budget
(``rollout.response_length`` for the whole trajectory) is spent; a tool context that does not fit
ends the row before it, so every trajectory ends on the policy's tokens.

The batch is verl's layout: ``responses`` are the trajectory (policy and tool tokens),
``attention_mask`` covers all of it, ``response_mask`` only the policy's tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from kuberl_runtime.data import PromptSample
from kuberl_runtime.data.tokenize import ChatTokenizer
from kuberl_runtime.rollout.base import RolloutEngine, SamplingParams, response_mask_from
from kuberl_runtime.rollout.tool_calls import (
    ToolCall,
    ToolSession,
    TruncateSide,
    finish_sessions,
    parse_hermes,
    run_calls,
    truncate_response,
)
from kuberl_runtime.rollout.turn_tokens import (
    SanityMode,
    context_ids,
    initial_prompt_ids,
    tokenization_matches,
)
from kuberl_runtime.tools.base import Tool

logger = logging.getLogger(__name__)

TOOL_AGENT = "tool_agent"
SINGLE_TURN_AGENT = "single_turn_agent"
AGENTS = (SINGLE_TURN_AGENT, TOOL_AGENT)


@dataclass(frozen=True)
class MultiTurnSettings:
    """``rollout.multi_turn.*`` and ``rollout.agent.default_agent_loop``."""

    max_assistant_turns: int | None = None
    max_user_turns: int | None = None
    max_parallel_calls: int = 1
    max_tool_response_length: int = 256
    tool_response_truncate_side: TruncateSide = "middle"
    tokenization_sanity_check_mode: SanityMode = "strict"
    default_agent_loop: str = SINGLE_TURN_AGENT
    tool_timeout_s: float = 60.0


@dataclass
class Trajectory:
    agent: str
    messages: list[dict[str, Any]]
    prompt_ids: list[int]
    session: ToolSession
    seed: int
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    """The engine's log-prob of each of ``ids`` (0 for the context the policy did not write);
    filled when ``TurnContext.log_probs``."""
    assistant_turns: int = 0
    user_turns: int = 0
    hit_turn_limit: bool = False
    done: bool = False
    calls: list[ToolCall] = field(default_factory=list)
    final_rewards: dict[str, float] = field(default_factory=dict)
    """Each called tool's ``calc_reward`` when the trajectory ended."""


@dataclass(frozen=True)
class TurnContext:
    engine: RolloutEngine
    tokenizer: ChatTokenizer
    params: SamplingParams
    eos_ids: Sequence[int]
    pad_id: int
    tools: dict[str, Tool]
    settings: MultiTurnSettings
    max_context: int = 0
    """Context plus new tokens never exceed it (the engine's model length); 0: no limit."""
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """data.apply_chat_template_kwargs: every turn is rendered as the dataset rendered prompts."""
    log_probs: bool = False
    """Keep the engine's log-prob of every sampled token (rollout correction)."""


def start_trajectory(
    sample: PromptSample, prompt_length: int, seed: int, ctx: TurnContext
) -> Trajectory:
    agent = sample.agent_name or ctx.settings.default_agent_loop
    if agent not in AGENTS:
        raise ValueError(
            f"row {sample.index}: agent_name={agent!r} is not an agent loop kuberl runs; "
            f"use one of {', '.join(AGENTS)}"
        )
    messages = [dict(m) for m in sample.raw_prompt or []]
    tools_kwargs = dict(sample.extra_info.get("tools_kwargs") or {})
    prompt_ids = list(sample.prompt_ids)
    if agent == TOOL_AGENT and messages and ctx.tools:
        schemas = [tool.schema for tool in ctx.tools.values()]
        prompt_ids = initial_prompt_ids(ctx.tokenizer, messages, schemas, ctx.chat_template_kwargs)
        if len(prompt_ids) > prompt_length:
            logger.warning(
                "row %d: prompt with tool schemas is %d tokens, keeping the last %d "
                "(rollout.prompt_length)",
                sample.index,
                len(prompt_ids),
                prompt_length,
            )
            prompt_ids = prompt_ids[-prompt_length:]
    session = ToolSession(ctx.tools, tools_kwargs)
    return Trajectory(agent, messages, prompt_ids, session, seed)


def run_trajectories(trajectories: list[Trajectory], ctx: TurnContext) -> None:
    """Turn after turn until every trajectory is done; tool instances released at the end."""
    budget = ctx.params.response_length
    turn = 0
    while live := [t for t in trajectories if not t.done]:
        _policy_turn(live, turn, ctx)
        _tool_turn([t for t in live if not t.done], budget, ctx)
        turn += 1
    rewards = finish_sessions([t.session for t in trajectories])
    for trajectory, reward in zip(trajectories, rewards, strict=True):
        trajectory.final_rewards = reward


def _policy_turn(live: list[Trajectory], turn: int, ctx: TurnContext) -> None:
    for group in _length_groups(live, ctx):
        _generate_group(group, turn, ctx)


def _length_groups(live: list[Trajectory], ctx: TurnContext) -> list[list[Trajectory]]:
    """Batches whose rows all fit ``max_context`` with the batch's longest remaining budget
    (one batch when they all do; the engine takes one ``response_length`` per call)."""
    budget = ctx.params.response_length
    order = sorted(live, key=lambda t: len(t.ids))
    groups: list[list[Trajectory]] = []
    for t in order:
        room = budget - len(groups[-1][0].ids) if groups else 0
        fits = not ctx.max_context or len(t.prompt_ids) + len(t.ids) + room <= ctx.max_context
        if groups and fits:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


def _generate_group(live: list[Trajectory], turn: int, ctx: TurnContext) -> None:
    budget = ctx.params.response_length
    contexts = [t.prompt_ids + t.ids for t in live]
    width = max(len(c) for c in contexts)
    prompts = torch.full((len(live), width), ctx.pad_id, dtype=torch.long)
    mask = torch.zeros((len(live), width), dtype=torch.long)
    for row, context in enumerate(contexts):
        prompts[row, width - len(context) :] = torch.tensor(context, dtype=torch.long)
        mask[row, width - len(context) :] = 1
    room = max(budget - len(t.ids) for t in live)
    seeds = [turn_seed(t.seed, turn) for t in live]
    params = replace(ctx.params, response_length=room)
    if ctx.log_probs:
        out, log_probs = ctx.engine.generate_with_log_probs(prompts, mask, params, seeds)
    else:
        out = ctx.engine.generate(prompts, mask, params, seeds)
        log_probs = torch.zeros(out.shape, dtype=torch.float32)
    kept = response_mask_from(out, ctx.eos_ids, ctx.params.ignore_eos)
    for row, (trajectory, tokens) in enumerate(zip(live, out.tolist(), strict=True)):
        n = min(int(kept[row].sum()), budget - len(trajectory.ids))
        trajectory.log_probs += log_probs[row, :n].tolist()
        _add_policy_tokens(trajectory, tokens[:n], ctx)


def _add_policy_tokens(t: Trajectory, own: list[int], ctx: TurnContext) -> None:
    t.ids += own
    t.mask += [1] * len(own)
    t.assistant_turns += 1
    ended = bool(own) and own[-1] in ctx.eos_ids
    text = ctx.tokenizer.decode(own[:-1] if ended else own, skip_special_tokens=False)
    t.messages.append({"role": "assistant", "content": text})
    s = ctx.settings
    t.calls = parse_hermes(text)[: s.max_parallel_calls] if t.agent == TOOL_AGENT else []
    if len(t.ids) >= ctx.params.response_length or not t.calls:
        t.done = True
    elif (s.max_assistant_turns and t.assistant_turns >= s.max_assistant_turns) or (
        s.max_user_turns and t.user_turns >= s.max_user_turns
    ):
        t.done = t.hit_turn_limit = True


def _tool_turn(calling: list[Trajectory], budget: int, ctx: TurnContext) -> None:
    if not calling:
        return
    s = ctx.settings
    results = run_calls([(t.session, t.calls) for t in calling], s.tool_timeout_s)
    schemas = [tool.schema for tool in ctx.tools.values()]
    for trajectory, calls in zip(calling, results, strict=True):
        trajectory.session.results.extend(calls)
        new = [
            {
                "role": "tool",
                "content": truncate_response(
                    r.output.text, s.max_tool_response_length, s.tool_response_truncate_side
                ),
            }
            for r in calls
        ]
        tail = ctx.tokenizer.decode(trajectory.ids[-1:], skip_special_tokens=False)
        tail = tail if trajectory.ids[-1:] and trajectory.ids[-1] in ctx.eos_ids else ""
        added = context_ids(
            ctx.tokenizer, trajectory.messages, new, tail, schemas, ctx.chat_template_kwargs
        )
        if len(trajectory.ids) + len(added) >= budget:
            trajectory.done = True  # no room for another turn: end on the policy's tokens
            continue
        trajectory.messages += new
        trajectory.ids += added
        trajectory.mask += [0] * len(added)
        trajectory.log_probs += [0.0] * len(added)
        trajectory.user_turns += 1


def turn_seed(row_seed: int, turn: int) -> int:
    """The first turn samples with the row's seed (a one-turn row is the single-turn rollout's)."""
    if turn == 0:
        return row_seed
    return int(np.random.SeedSequence([row_seed, turn]).generate_state(1)[0])


def check_tokenization(trajectories: Sequence[Trajectory], ctx: TurnContext) -> int:
    """How many trajectories differ from the template's rendering (logged once a batch)."""
    mode = ctx.settings.tokenization_sanity_check_mode
    bad = [
        t
        for t in trajectories
        if t.agent == TOOL_AGENT
        and t.user_turns
        and not tokenization_matches(
            ctx.tokenizer, t.prompt_ids + t.ids, t.messages, mode, ctx.chat_template_kwargs
        )
    ]
    if bad:
        logger.warning(
            "%d of %d trajectories differ from the chat template's tokenization of their "
            "messages (tokenization_sanity_check_mode=%s): training sees the tokens the policy "
            "sampled, a re-rendered conversation would differ",
            len(bad),
            len(trajectories),
            mode,
        )
    return len(bad)
