"""`SFTTrainer.fit`: supervised fine-tuning on the RL engine (FSDP2 model, optimizer, packing).

One step = one global batch of `data.train_batch_size` conversations, split evenly over the
data-parallel ranks, cut into micro-batches (`micro_batch_size_per_gpu`, or a token budget with
`use_dynamic_bsz`). The loss is verl 0.9.1's `sft_loss`: the negative log-likelihood summed
over every trained (assistant) token of the global batch, divided by their number; gradients
accumulate over micro-batches and FSDP averages them over ranks, so one optimizer step sees
the global token mean whatever the split. With Ulysses sequence parallelism
(`engine.ulysses_sequence_parallel_size`, engine/ulysses.py) the ranks of an SP group take
their data-parallel rank's rows, each runs its slice of every sequence, and the log-probs are
gathered back whole, as in the RL trainer. Checkpoints, resume, export, metrics and progress
follow the RL trainer (`trainer/loop.py`) and share its code.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
import torch.distributed as dist

from kuberl_api.plan.sft import SFTPlan
from kuberl_runtime.checkpoint.contents import Contents
from kuberl_runtime.checkpoint.export import export_hf_model, write_hf_metadata
from kuberl_runtime.checkpoint.manager import TrainState
from kuberl_runtime.checkpoint.mirrored import checkpoint_manager
from kuberl_runtime.checkpoint.outputs import RunUploads
from kuberl_runtime.engine.logprob import forward_responses
from kuberl_runtime.engine.micro import MicroBatching
from kuberl_runtime.engine.model_builder import build_causal_lm, model_device
from kuberl_runtime.engine.optim import clip_and_step
from kuberl_runtime.engine.optim_offload import OptimizerOffload
from kuberl_runtime.faults import maybe_crash
from kuberl_runtime.sft.batches import collate, rank_share
from kuberl_runtime.sft.components import SFTComponents
from kuberl_runtime.sft.export import full_state_dict
from kuberl_runtime.tracking import ProgressReporter
from kuberl_runtime.trainer import metrics as M
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.state import capture_rng, restore_rng
from kuberl_runtime.trainer.step_loop import StepLoop

logger = logging.getLogger(__name__)


class SFTTrainer(StepLoop):
    plan: SFTPlan

    def __init__(self, components: SFTComponents, reporter: ProgressReporter) -> None:
        plan, ranks = components.plan, components.ranks
        checkpoint = plan.checkpoint
        contents = Contents(tuple(checkpoint.save_contents), tuple(checkpoint.load_contents))
        checkpoints = checkpoint_manager(
            components.run.checkpoint_dir,
            ranks,
            plan.trainer.checkpoint_mirror,
            plan.trainer.max_ckpt_to_keep or None,
            {"actor": contents},
        )
        uploads = RunUploads(checkpoints, plan.paths, ranks)
        super().__init__(plan, ranks, components.total_training_steps, reporter, uploads)
        self.checkpoints = checkpoints
        self.c = components
        self.optimizer_offload = OptimizerOffload(
            components.optimizer, enabled=self.plan.fsdp_config.optimizer_offload
        )
        data = self.plan.data
        self.batching = MicroBatching(
            data.micro_batch_size_per_gpu,
            data.use_dynamic_bsz,
            data.max_token_len_per_gpu,
            components.sp.size,
        )

    def fit(self) -> None:
        self.global_step = self._resume()
        tracker = self.tracker = self._tracker()
        self.reporter.on_start(start_step=self.global_step, total_steps=self.total_steps)
        try:
            self._run_steps()
        finally:
            tracker.close()

    def train_step(self, step: int) -> dict[str, float]:
        timings: dict[str, float] = {}
        epoch = self.c.sampler.epoch
        with M.timer("step", timings):
            with M.timer("update_actor", timings):
                batch = self._local_batch(self.c.sampler.next_batch())
                maybe_crash("step_middle", step)
                loss, tokens = self._update(batch)
                with self.optimizer_offload.for_step():
                    grad_norm, _ = clip_and_step(
                        self.c.model, self.c.optimizer, self.plan.grad_clip
                    )
                lr = self.c.lr_scheduler.get_last_lr()[0]
                self.c.lr_scheduler.step()
            extra: dict[str, float] = {}
            if self._due(self.plan.trainer.test_freq, step) and self.c.val_data:
                with M.timer("testing", timings):
                    extra["val/loss"] = self.validation_loss()
            if self._due(self.plan.trainer.save_freq, step):
                with M.timer("save_checkpoint", timings):
                    self.save_checkpoint(step)
        return {
            "training/global_step": step,
            "training/epoch": epoch,
            "train/loss": loss,
            "train/grad_norm": grad_norm,
            "train/lr": lr,
            "train/global_tokens": tokens,
            **{f"timing_s/{name}": seconds for name, seconds in timings.items()},
            **extra,
        }

    def _local_batch(self, indices: list[int]) -> Batch:
        return collate([self.c.train_data[i] for i in self._share(indices)], self.c.pad_id)

    def _share(self, indices: list[int]) -> list[int]:
        """This rank's data-parallel rank's share (the ranks of an SP group hold the same rows)."""
        placement = self.plan.placement
        return rank_share(indices, self.c.ranks.rank // placement.sp_size, placement.dp_size)

    def _group_sum(self, value: torch.Tensor) -> float:
        """`value` summed over the data-parallel ranks (each SP group counted once)."""
        return _all_sum(value, model_device(self.c.model)) / self.c.sp.size

    def _update(self, batch: Batch) -> tuple[float, float]:
        """Backward over the micro-batches; returns (global token-mean loss, trained tokens)."""
        model, dp = self.c.model, self.plan.placement.dp_size
        tokens = self._group_sum(batch["response_mask"].sum().double())
        denominator = max(tokens, 1.0)
        model.train()
        local_sum = 0.0
        for rows in self.batching.split(batch):
            nll = self._nll(batch.select(rows))
            # FSDP averages gradients over all dp x sp ranks, and the ranks of an SP group add up
            # to sp times their replica's gradient (engine/ulysses.py): scale by dp to get the
            # global token mean's.
            (nll * dp / denominator).backward()
            local_sum += float(nll.detach())
        return self._group_sum(torch.tensor(local_sum, dtype=torch.float64)) / denominator, tokens

    def _nll(self, micro: Batch) -> torch.Tensor:
        micro = micro.to(model_device(self.c.model))
        out = forward_responses(
            self.c.model,
            micro.tensors,
            use_remove_padding=self.plan.use_remove_padding,
            sp=self.c.sp,
        )
        assert out.log_probs is not None
        return -(out.log_probs * micro["response_mask"]).sum()

    def validation_loss(self) -> float:
        """Token-mean NLL over the validation conversations (each rank its even share)."""
        mine = self._share(list(range(len(self.c.val_data))))
        batch = collate([self.c.val_data[i] for i in mine], self.c.pad_id)
        self.c.model.eval()
        local_sum = 0.0
        with torch.no_grad():
            for rows in self.batching.split(batch):
                local_sum += float(self._nll(batch.select(rows)))
        tokens = self._group_sum(batch["response_mask"].sum().double())
        return self._group_sum(torch.tensor(local_sum, dtype=torch.float64)) / max(tokens, 1.0)

    # ---- checkpoints, export, tracking -------------------------------------------------------
    def _state(self, step: int) -> TrainState:
        extra = {"actor_lr_scheduler": self.c.lr_scheduler.state_dict(), "rng": capture_rng()}
        data = {"global_step": step, "sampler": self.c.sampler.state_dict()}
        return TrainState({"actor": (self.c.model, self.c.optimizer)}, extra, data)

    def save_checkpoint(self, step: int) -> Path:
        full = full_state_dict(self.c.model) if self._saves_hf_model else None

        def write_main_files(tmp: Path) -> None:
            (tmp / "config.json").write_text(self.c.run.to_json())
            hf_dir = tmp / "actor" / "huggingface"
            hf_dir.parent.mkdir(parents=True, exist_ok=True)
            if full is not None:
                export_hf_model(self._host_model(full), self.c.tokenizer, hf_dir)
            else:
                write_hf_metadata(self.c.model, self.c.tokenizer, hf_dir)

        path = self.checkpoints.save(step, self._state(step), write_main_files)
        self._saved = (step, path)
        return path

    @property
    def _saves_hf_model(self) -> bool:
        return self.checkpoints.contents_of("actor").saves("hf_model")

    def _resume(self) -> int:
        step_dir = self._checkpoint_to_resume()
        if step_dir is None:
            return 0
        state = self._state(0)
        self.checkpoints.load(step_dir, state)
        self.optimizer_offload.park()  # loading puts the state beside the parameters
        if state.extra:
            self.c.lr_scheduler.load_state_dict(state.extra["actor_lr_scheduler"])
            restore_rng(state.extra["rng"])
        self.c.sampler.load_state_dict(state.data["sampler"])
        return int(state.data["global_step"])

    def export(self) -> str | None:
        """The trained model, merged and unsharded, into `<output_dir>/huggingface/`."""
        full = full_state_dict(self.c.model)
        if not self.c.ranks.is_main:
            return None
        target = Path(self.plan.paths.hf_export_dir)
        export_hf_model(self._host_model(full), self.c.tokenizer, target)
        logger.info("exported the trained model to %s", target)
        return str(target)

    def _host_model(self, full: dict[str, torch.Tensor]) -> torch.nn.Module:
        host = build_causal_lm(self.c.spec)
        host.load_state_dict(full)
        return host


def _all_sum(value: torch.Tensor, device: torch.device) -> float:
    if dist.is_available() and dist.is_initialized():
        value = value.to(device)
        dist.all_reduce(value)
    return float(value)
