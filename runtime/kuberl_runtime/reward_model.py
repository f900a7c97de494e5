"""A reward model (`reward_model.enable`): a sequence-classification head scoring prompt+response.

The model reads the actor's token ids directly, so it must share the actor's tokenizer
(`reward_model.model.input_tokenizer` other than the actor's is not supported yet). Each rank
scores its own rows; the head reads the last non-padding token.
"""

from __future__ import annotations

import torch
from torch import nn

from kuberl_runtime.engine.packing import fixed_micro_batches
from kuberl_runtime.trainer.batch import Batch


class RewardModelScorer:
    def __init__(self, model: nn.Module, micro_batch_size: int | None = None) -> None:
        self.model = model.eval()
        self.micro_batch_size = micro_batch_size

    @torch.no_grad()
    def score(self, batch: Batch) -> torch.Tensor:
        """(rows,) float scores."""
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
