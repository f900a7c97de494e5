"""The trainer's multi-turn rollout (``rollout.multi_turn.enable``): tools loaded once at start,
each generation run turn by turn over the trainer's rollout engine, its metrics kept for the step.
"""

from __future__ import annotations

from typing import Any

from kuberl_api.plan import RunPlan
from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.rollout.base import RolloutEngine, SamplingParams
from kuberl_runtime.rollout.multi_turn import MultiTurnSettings, TurnContext
from kuberl_runtime.rollout.multi_turn_batch import generate_multi_turn
from kuberl_runtime.tools import Tool, load_tools
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.generation import VALIDATION_STREAM, row_seed


class MultiTurnGenerator:
    def __init__(
        self,
        plan: RunPlan,
        engine: RolloutEngine,
        tokenizer: Any,
        ranks: RankInfo,
        *,
        eos_ids: list[int],
        pad_id: int,
    ) -> None:
        m = plan.rollout.multi_turn
        self.plan = plan
        self.engine, self.tokenizer, self.ranks = engine, tokenizer, ranks
        self.eos_ids, self.pad_id = eos_ids, pad_id
        self.tools: dict[str, Tool] = load_tools(m.tool_config_path, m.function_tool_path)
        self.settings = MultiTurnSettings(
            max_assistant_turns=m.max_assistant_turns,  # the plan's 0: no limit
            max_user_turns=m.max_user_turns,
            max_parallel_calls=m.max_parallel_calls,
            max_tool_response_length=m.max_tool_response_length,
            tool_response_truncate_side=m.tool_response_truncate_side,
            tokenization_sanity_check_mode=m.tokenization_sanity_check_mode,
            default_agent_loop=m.default_agent_loop,
            tool_timeout_s=m.tool_timeout,
        )
        self.train_metrics: dict[str, float] = {}

    def generate(
        self, prompts: Batch, params: SamplingParams, stream: int, log_probs: bool = False
    ) -> Batch:
        """``log_probs``: the batch holds the engine's ``rollout_log_probs`` of every turn."""
        ctx = TurnContext(
            engine=self.engine,
            tokenizer=self.tokenizer,
            params=params,
            eos_ids=self.eos_ids,
            pad_id=self.pad_id,
            tools=self.tools,
            settings=self.settings,
            chat_template_kwargs=dict(self.plan.data.apply_chat_template_kwargs),
            log_probs=log_probs,
        )
        seed = self.plan.trainer.seed
        seeds = [row_seed(seed, stream, row) for row in range(len(prompts))]
        batch, metrics = generate_multi_turn(
            prompts,
            ctx,
            ranks=self.ranks,
            row_seeds=seeds,
            prompt_length=self.plan.rollout.prompt_length,
        )
        if stream < VALIDATION_STREAM:
            self.train_metrics = metrics
        return batch

    def pop_metrics(self) -> dict[str, float]:
        """The last training generation's rollout metrics (once)."""
        metrics, self.train_metrics = self.train_metrics, {}
        return metrics


def multi_turn_generator(plan: RunPlan, components: Any) -> MultiTurnGenerator | None:
    """None unless ``rollout.multi_turn.enable``; ``components``: the trainer's Components."""
    if not plan.rollout.multi_turn.enable:
        return None
    rollout = components.rollout
    return MultiTurnGenerator(
        plan,
        rollout,
        components.tokenizer,
        components.ranks,
        eos_ids=list(rollout.eos_ids),
        pad_id=rollout.pad_id,
    )
