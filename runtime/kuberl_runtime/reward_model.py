"""A reward model (`reward_model.enable`): a sequence-classification head scoring prompt+response.

When the RM has a tokenizer of its own (`reward_model.model.input_tokenizer` names the actor-side
tokenizer and differs from the RM's path), each row is decoded with the input tokenizer and
rendered again with the RM's chat template (the chat prompt plus the response as the assistant
turn, as verl's `_switch_chat_template` does), then tokenised by the RM's tokenizer. Otherwise the
actor's ids are fed as they are. Each rank scores its own rows; the head reads the last
non-padding token. The model is FSDP2-sharded (`reward_model.model.fsdp_config`) with the actor's
sharded init (`engine/init.py`): every rank builds it on the meta device and keeps its shards,
only rank 0 reads the checkpoint and broadcasts each tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import nn
from transformers import AutoModelForSequenceClassification

from kuberl_api.plan.sections import FSDPPlan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.init import build_sharded
from kuberl_runtime.engine.model_builder import ModelSpec, build_reward_model, load_config
from kuberl_runtime.engine.packing import fixed_micro_batches
from kuberl_runtime.trainer.batch import Batch


@dataclass(frozen=True)
class RewardInputs:
    """Decode with `source`, render and tokenise with `target` (the RM's tokenizer)."""

    source: Any
    target: Any

    def rows(self, batch: Batch) -> Batch:
        texts = [self._text(batch, row) for row in range(len(batch))]
        ids = [self.target(text, add_special_tokens=False)["input_ids"] for text in texts]
        pad = self.target.pad_token_id
        pad = pad if pad is not None else self.target.eos_token_id
        width = max(len(row) for row in ids)
        input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for row, row_ids in enumerate(ids):
            input_ids[row, : len(row_ids)] = torch.tensor(row_ids, dtype=torch.long)
            mask[row, : len(row_ids)] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return Batch({"input_ids": input_ids, "attention_mask": mask, "position_ids": positions})

    def _text(self, batch: Batch, row: int) -> str:
        valid = batch["response_mask"][row].bool()
        response = self.source.decode(batch["responses"][row][valid], skip_special_tokens=True)
        sample = batch.objects["sample"][row]
        if sample.raw_prompt is None:  # data.return_raw_chat off: the rendered prompt as text
            prompts = batch["prompts"][row]
            prompt_ids = prompts[batch["attention_mask"][row][: len(prompts)].bool()]
            return self.source.decode(prompt_ids, skip_special_tokens=True) + response
        chat = [*sample.raw_prompt, {"role": "assistant", "content": response}]
        return self.target.apply_chat_template(chat, tokenize=False)


class RewardModelScorer:
    def __init__(
        self,
        model: nn.Module,
        micro_batch_size: int | None = None,
        inputs: RewardInputs | None = None,
    ) -> None:
        self.model = model.eval()
        self.micro_batch_size = micro_batch_size
        self.inputs = inputs

    @torch.no_grad()
    def score(self, batch: Batch) -> torch.Tensor:
        """(rows,) float scores."""
        if self.inputs is not None:
            batch = self.inputs.rows(batch)
        scores = []
        for rows in fixed_micro_batches(len(batch), self.micro_batch_size or len(batch)):
            micro = batch.select(rows).to(next(self.model.parameters()).device)
            logits = self.model(
                input_ids=micro["input_ids"],
                attention_mask=micro["attention_mask"],
                position_ids=micro["position_ids"],
                use_cache=False,
            ).logits
            scores.append(logits[:, 0].float().cpu())
        return torch.cat(scores)


def build_reward_model_empty(spec: ModelSpec, dtype: torch.dtype) -> nn.Module:
    """`build_reward_model` on the meta device: shapes only, no checkpoint read."""
    config = load_config(spec, num_labels=1)
    with torch.device("meta"):
        model = AutoModelForSequenceClassification.from_config(
            config,
            dtype=dtype,
            trust_remote_code=spec.trust_remote_code,
            attn_implementation=config._attn_implementation,
        )
    return model.requires_grad_(False).eval()


def build_sharded_reward_model(
    spec: ModelSpec,
    dtype: torch.dtype,
    fsdp_config: FSDPPlan,
    device: Device,
    target: torch.device,
    *,
    is_main: bool,
) -> nn.Module:
    """The RM's shards on `target`; only rank 0 (`is_main`) reads the checkpoint."""
    model = build_sharded(
        partial(build_reward_model_empty, spec, dtype),
        partial(build_reward_model, spec, dtype),
        fsdp_config,
        device,
        target,
        is_main=is_main,
    )
    return model.requires_grad_(False).eval()
