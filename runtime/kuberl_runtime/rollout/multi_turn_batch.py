"""A multi-turn rollout of a prompt batch, sharded over ranks, as one verl batch plus metrics.

Each rank runs its contiguous share of the rows turn by turn (``multi_turn.run_trajectories``);
every rank gets the whole batch back. ``responses`` hold each trajectory (right-padded),
``attention_mask`` covers prompt and trajectory, ``response_mask`` the policy's tokens only;
with ``TurnContext.log_probs``, ``rollout_log_probs`` hold the engine's log-prob of each policy
token (0 off ``response_mask``), as the single-turn rollout's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch

from kuberl_runtime.distributed import RankInfo, all_gather_objects, all_gather_rows
from kuberl_runtime.rollout.multi_turn import (
    Trajectory,
    TurnContext,
    check_tokenization,
    run_trajectories,
    start_trajectory,
)
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.generation import ROLLOUT_LOG_PROBS

ROW_INFO = ("num_turns", "tool_rewards", "tool_final_rewards")
"""What each row's ``extra_info`` gains for the reward function (verl's naive reward manager
passes ``num_turns``; ``tool_rewards`` are the calls' step rewards, verl's list;
``tool_final_rewards`` each called tool's ``calc_reward`` at the trajectory's end)."""


def generate_multi_turn(
    prompts: Batch,
    ctx: TurnContext,
    *,
    ranks: RankInfo,
    row_seeds: Sequence[int],
    prompt_length: int,
) -> tuple[Batch, dict[str, float]]:
    """The batch and its rollout metrics (every rank's rows)."""
    samples = prompts.objects["sample"]
    ctx = replace(ctx, max_context=prompt_length + ctx.params.response_length)
    num_rows = len(samples)
    per_rank = -(-num_rows // ranks.world_size)
    padded = list(range(num_rows)) + [0] * (per_rank * ranks.world_size - num_rows)
    mine = padded[ranks.rank * per_rank : (ranks.rank + 1) * per_rank]
    trajectories = [
        start_trajectory(samples[row], prompt_length, row_seeds[row], ctx) for row in mine
    ]
    ctx.engine.wake_up()
    run_trajectories(trajectories, ctx)
    ctx.engine.sleep()
    mismatches = check_tokenization(trajectories, ctx)
    local = trajectory_tensors(
        trajectories, prompt_length, ctx.params.response_length, ctx.pad_id, ctx.log_probs
    )
    whole = {name: all_gather_rows(t)[:num_rows] for name, t in local.items()}
    log_probs = whole.pop(ROLLOUT_LOG_PROBS, None)
    summaries = [
        s[: max(0, num_rows - r * per_rank)]
        for r, s in enumerate(all_gather_objects([_summary(t) for t in trajectories]))
    ]
    rows = [row for part in summaries for row in part]
    batch = build_multi_turn_batch(**whole)
    if log_probs is not None:
        batch[ROLLOUT_LOG_PROBS] = log_probs * batch["response_mask"]
    batch.objects = dict(prompts.objects)
    batch.objects["sample"] = [
        replace(s, extra_info={**s.extra_info, **{k: row[k] for k in ROW_INFO}})
        for s, row in zip(samples, rows, strict=True)
    ]
    mismatched = sum(all_gather_objects(mismatches))
    return batch, rollout_metrics(rows, mismatched)


def trajectory_tensors(
    trajectories: Sequence[Trajectory],
    prompt_length: int,
    response_length: int,
    pad_id: int,
    log_probs: bool = False,
) -> dict[str, torch.Tensor]:
    rows = len(trajectories)
    prompts = torch.full((rows, prompt_length), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((rows, prompt_length), dtype=torch.long)
    responses = torch.full((rows, response_length), pad_id, dtype=torch.long)
    trajectory_mask = torch.zeros((rows, response_length), dtype=torch.long)
    policy_mask = torch.zeros((rows, response_length), dtype=torch.long)
    engine_log_probs = torch.zeros((rows, response_length), dtype=torch.float32)
    for row, t in enumerate(trajectories):
        p, n = len(t.prompt_ids), len(t.ids)
        prompts[row, prompt_length - p :] = torch.tensor(t.prompt_ids, dtype=torch.long)
        prompt_mask[row, prompt_length - p :] = 1
        responses[row, :n] = torch.tensor(t.ids, dtype=torch.long)
        trajectory_mask[row, :n] = 1
        policy_mask[row, :n] = torch.tensor(t.mask, dtype=torch.long)
        if log_probs:
            engine_log_probs[row, :n] = torch.tensor(t.log_probs, dtype=torch.float32)
    tensors = {
        "prompts": prompts,
        "prompt_mask": prompt_mask,
        "responses": responses,
        "trajectory_mask": trajectory_mask,
        "response_mask": policy_mask,
    }
    return {**tensors, ROLLOUT_LOG_PROBS: engine_log_probs} if log_probs else tensors


def build_multi_turn_batch(
    prompts: torch.Tensor,
    prompt_mask: torch.Tensor,
    responses: torch.Tensor,
    trajectory_mask: torch.Tensor,
    response_mask: torch.Tensor,
) -> Batch:
    prompt_positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
    steps = torch.arange(1, responses.shape[1] + 1).unsqueeze(0)
    return Batch(
        {
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": torch.cat([prompt_mask, trajectory_mask], dim=1),
            "position_ids": torch.cat([prompt_positions, prompt_positions[:, -1:] + steps], 1),
            "response_mask": response_mask,
        }
    )


def _summary(t: Trajectory) -> dict[str, object]:
    return {
        "num_turns": t.assistant_turns + t.user_turns + 1,
        "assistant_turns": t.assistant_turns,
        "hit_turn_limit": t.hit_turn_limit,
        "tool_rewards": list(t.session.step_rewards),
        "tool_final_rewards": dict(t.final_rewards),
        "calls": [(r.name, r.failed, r.latency_s) for r in t.session.results],
    }


def rollout_metrics(rows: Sequence[dict], mismatched: int) -> dict[str, float]:
    """verl's ``num_turns/*``; per tool: calls, failures and latency (``timing_s/tool/*``)."""
    turns = np.array([row["num_turns"] for row in rows], dtype=float)
    metrics = {
        "num_turns/min": float(turns.min()),
        "num_turns/max": float(turns.max()),
        "num_turns/mean": float(turns.mean()),
        "multi_turn/assistant_turns/mean": float(np.mean([r["assistant_turns"] for r in rows])),
        "multi_turn/turn_limit_ratio": float(np.mean([r["hit_turn_limit"] for r in rows])),
        "multi_turn/tokenization_mismatches": float(mismatched),
    }
    per_tool: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    for row in rows:
        for name, failed, latency in row["calls"]:
            per_tool[name].append((failed, latency))
    for name, calls in sorted(per_tool.items()):
        metrics[f"tool/{name}/calls"] = float(len(calls))
        metrics[f"tool/{name}/failures"] = float(sum(failed for failed, _ in calls))
        # wall-clock, so among the timings (timing_s/*), apart from the deterministic metrics
        metrics[f"timing_s/tool/{name}/mean"] = float(np.mean([lat for _, lat in calls]))
        metrics[f"timing_s/tool/{name}/max"] = float(max(lat for _, lat in calls))
    return metrics
