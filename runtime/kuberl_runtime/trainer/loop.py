"""`Trainer.fit`: verl's PPO step order, SPMD on every rank.

generate → rewards → old log-probs → reference log-probs → values → (in-reward KL) advantages →
critic update → actor update (after critic_warmup) → weight sync to the rollout → validation
every test_freq → checkpoint every save_freq → metrics. Every rank holds the whole batch;
forward and update work is split so that each rank handles its share of every mini-batch
(`trainer/shards.py`).

This is the plain step. Its variants live beside it: DAPO's dynamic sampling fills the step's
batch from several generation batches (`trainer/dynamic_sampling.py`); rollout correction takes
π_old from the rollout in bypass mode and reweights the batch in decoupled mode
(`trainer/rollout_correction.py`, called from `trainer/advantage_step.py`, which turns scores
into advantages).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from kuberl_api.plan import RunPlan
from kuberl_runtime.algorithms import agg_loss, build_kl_controller
from kuberl_runtime.checkpoint.contents import Contents
from kuberl_runtime.checkpoint.export import export_hf_model, write_hf_metadata
from kuberl_runtime.checkpoint.mirrored import checkpoint_manager
from kuberl_runtime.checkpoint.outputs import RunUploads
from kuberl_runtime.engine.micro import MicroBatching
from kuberl_runtime.engine.mrope import MRopeSpec
from kuberl_runtime.faults import maybe_crash
from kuberl_runtime.reporting.phases import beating
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.tracking import (
    ProgressReporter,
)
from kuberl_runtime.trainer import metrics as M
from kuberl_runtime.trainer.advantage_step import compute_advantages
from kuberl_runtime.trainer.balance import balance_order, row_workloads, seqlen_balance_metrics
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.components import Components
from kuberl_runtime.trainer.dynamic_sampling import (
    dynamic_sampler,
    gen_batch_stream,
    gen_batch_uid_prefix,
)
from kuberl_runtime.trainer.generation import VALIDATION_STREAM, generate_sharded, prompt_batch
from kuberl_runtime.trainer.multi_turn import multi_turn_generator
from kuberl_runtime.trainer.remax import REMAX_STREAM, greedy_params, reward_baselines
from kuberl_runtime.trainer.rewards import score_batch
from kuberl_runtime.trainer.rollout_correction import use_rollout_as_old
from kuberl_runtime.trainer.shards import RowShards
from kuberl_runtime.trainer.state import restore_train_state, train_state
from kuberl_runtime.trainer.step_loop import StepLoop
from kuberl_runtime.trainer.validation import validation_metrics
from kuberl_runtime.trainer.weight_sync import gathered_weights

logger = logging.getLogger(__name__)


class Trainer(StepLoop):
    plan: RunPlan

    def __init__(self, components: Components, reporter: ProgressReporter) -> None:
        plan, ranks = components.plan, components.ranks
        checkpoints = checkpoint_manager(
            components.run.checkpoint_dir,
            ranks,
            plan.trainer.checkpoint_mirror,
            plan.trainer.max_ckpt_to_keep,  # the plan's 0: keep all
            checkpoint_contents(plan),
        )
        uploads = RunUploads(checkpoints, plan.paths, ranks)
        super().__init__(plan, ranks, components.total_training_steps, reporter, uploads)
        self.checkpoints = checkpoints
        self.c = components
        self.multi_turn = multi_turn_generator(self.plan, components)
        algo = self.plan.algorithm
        self.kl_ctrl = (
            build_kl_controller(
                algo.kl_ctrl.type,
                kl_coef=algo.kl_ctrl.kl_coef,
                target_kl=algo.kl_ctrl.target_kl,
                horizon=algo.kl_ctrl.horizon,
            )
            if algo.use_kl_in_reward
            else None
        )
        self.dynamic = dynamic_sampler(self.plan, components.ranks, components.run.checkpoint_dir)
        self.shards = RowShards(self.plan, components.ranks)

    # ---- run -------------------------------------------------------------------------------
    def fit(self) -> None:
        trainer = self.plan.trainer
        self.global_step = self._resume()
        self.sync_rollout_weights()
        tracker = self.tracker = self._tracker()
        self.reporter.on_start(start_step=self.global_step, total_steps=self.total_steps)
        try:
            if self.c.val_data is not None and trainer.val_before_train:
                with beating(self.reporter, "validation"):  # the operator hears it is alive
                    before = self.validate()
                tracker.log(before, step=self.global_step)
                if trainer.val_only:
                    return
            self._run_steps()
        finally:
            tracker.close()

    def train_step(self, step: int) -> dict[str, float]:
        timings: dict[str, float] = {}
        epoch = self.c.sampler.epoch
        with M.timer("step", timings):
            batch, sampling_metrics = self._generate_step_batch(step, timings)
            balance_metrics: dict[str, float] = {}
            if self.plan.trainer.balance_batch:
                batch, balance_metrics = self._balance(batch)
            maybe_crash("step_middle", step)
            worker_metrics = self._prepare_and_update(batch, step, timings)
            extra: dict[str, float] = {}
            if self._due(self.plan.trainer.test_freq, step) and self.c.val_data is not None:
                with M.timer("testing", timings), beating(self.reporter, "validation"):
                    extra.update(self.validate())
            if self._due(self.plan.trainer.save_freq, step):
                with M.timer("save_checkpoint", timings), beating(self.reporter, "checkpoint"):
                    self.save_checkpoint(step)
        return {
            "training/global_step": step,
            "training/epoch": epoch,
            **worker_metrics,
            **balance_metrics,
            **sampling_metrics,
            **M.compute_data_metrics(batch, use_critic=self.c.critic is not None),
            **M.compute_timing_metrics(batch, timings),
            **M.compute_throughput_metrics(
                batch, timings["step"], self.c.ranks.world_size, self.c.device
            ),
            **extra,
            **(self.multi_turn.pop_metrics() if self.multi_turn else {}),
        }

    # ---- one step ----------------------------------------------------------------------------
    def _generate_step_batch(
        self, step: int, timings: dict[str, float]
    ) -> tuple[Batch, dict[str, float]]:
        """The step's rows; with DAPO's filter_groups, from as many generation batches as the
        filter needs (trainer/dynamic_sampling.py), and its metrics."""
        if self.dynamic is None:
            return self._generate_gen_batch(step, 0, timings)[0], {}
        return self.dynamic.fill_scored(
            step, self.c.sampler, lambda index: self._generate_gen_batch(step, index, timings)
        )

    def _generate_gen_batch(
        self, step: int, index: int, timings: dict[str, float]
    ) -> tuple[Batch, dict[str, list[Any]]]:
        """Generation batch `index` of `step`, scored; and the reward's extra info."""
        samples = self.c.train_data.batch(self.c.sampler.next_batch())
        rollout_cfg = self.plan.rollout
        stream = gen_batch_stream(step, index)
        uids = gen_batch_uid_prefix(step, index)
        prompts = prompt_batch(
            samples, rollout_cfg.n, self._prompt_length, self.c.rollout.pad_id, uids
        )
        params = SamplingParams(
            response_length=self._response_length,
            temperature=rollout_cfg.temperature,
            top_k=rollout_cfg.top_k,
            top_p=rollout_cfg.top_p,
            do_sample=rollout_cfg.do_sample,
            ignore_eos=rollout_cfg.ignore_eos,
        )
        with M.timer("gen", timings):
            batch = self._generate(
                prompts, params, stream, self.plan.rollout_correction.calculate_log_probs
            )
        with M.timer("reward", timings):
            batch["token_level_scores"], extra = self._scores_and_extra(batch)
        if self.plan.algorithm.adv_estimator == "remax":
            with M.timer("gen_max", timings):
                batch["reward_baselines"] = reward_baselines(
                    samples,
                    rollout_cfg.n,
                    prompt_length=self._prompt_length,
                    pad_id=self.c.rollout.pad_id,
                    generate=lambda greedy: self._generate(
                        greedy, greedy_params(params), stream=REMAX_STREAM + stream
                    ),
                    score=lambda greedy: self._scores_and_extra(greedy)[0],
                )
        return batch, extra

    def _scores_and_extra(self, batch: Batch) -> tuple[torch.Tensor, dict[str, list[Any]]]:
        model_scores = self._reward_model_scores(batch)
        return score_batch(batch, self.c.reward_manager, self.c.tokenizer, model_scores)

    def _balance(self, batch: Batch) -> tuple[Batch, dict[str, float]]:
        """verl's balance_batch: rank r gets a group of rows with a near-equal token load."""
        placement = self.plan.placement
        # One group per data-parallel rank (the first rank of each SP group stands for it).
        positions = [
            self.shards.local_rows(len(batch), r * placement.sp_size)
            for r in range(placement.dp_size)
        ]
        order = balance_order(row_workloads(batch["attention_mask"]), positions)
        seqlens = batch["attention_mask"].sum(-1).tolist()
        after = [[order[p] for p in rank_positions] for rank_positions in positions]
        return batch.select(order), seqlen_balance_metrics(seqlens, positions, after)

    def _prepare_and_update(
        self, batch: Batch, step: int, timings: dict[str, float]
    ) -> dict[str, float]:
        plan, actor, critic = self.plan, self.c.actor, self.c.critic
        metrics: dict[str, list[float]] = {}
        updates = plan.trainer.critic_warmup <= step
        # on_policy_shortcut (validated on-policy): the update's own pass stands in for π_old.
        on_policy = plan.actor.on_policy_shortcut and updates
        bypass = plan.rollout_correction.bypass_mode  # π_old: the rollout's own log-probs
        entropys = None if on_policy or bypass else self._old_log_probs(batch, timings)
        if bypass:
            use_rollout_as_old(batch)
        entropy_mask = batch["response_mask"]  # before rollout correction's rejection
        if plan.ref.enabled:
            with M.timer("ref", timings):
                batch["ref_log_prob"] = self.shards.on_shards(
                    batch,
                    lambda local: {"out": actor.compute_ref_log_prob(local, self._ref_batching())},
                )["out"]
        if critic is not None:
            with M.timer("values", timings):
                batch["values"] = self.shards.on_shards(
                    batch, lambda local: {"out": critic.compute_values(local)}
                )["out"]
        with M.timer("adv", timings):
            scalar_metrics = compute_advantages(batch, plan, self.kl_ctrl)
        local = batch.select(self.shards.local_rows(len(batch)))
        # ROLL's max_len/difficulty masks leave rows out of the losses; with none left, ROLL skips.
        skip = "final_response_mask" in batch.tensors and not batch["final_response_mask"].any()
        if "final_response_mask" in local.tensors:
            local["response_mask"] = local["final_response_mask"]
        if critic is not None and not skip:
            with M.timer("update_critic", timings):
                metrics.update(critic.update_critic(local))
        if updates and not skip:
            with M.timer("update_actor", timings):
                if on_policy:
                    update_metrics, local_entropys = actor.update_policy_on_policy(local)
                    entropys = self.shards.gather_local(len(batch), {"entropys": local_entropys})
                    entropys = entropys["entropys"]
                else:
                    update_metrics = actor.update_policy(local)
                metrics.update(update_metrics)
            with M.timer("update_weights", timings):
                self.sync_rollout_weights()
        if entropys is None and not bypass:  # on-policy, but no row updated: measure it
            entropys = self._old_log_probs(batch, timings)
        reduced = M.reduce_across_ranks(metrics)
        # verl reports `actor/entropy` over the whole batch, from the old-log-prob pass (none in
        # bypass mode: the update's own, when it computes one).
        if entropys is not None:
            entropy = agg_loss(entropys, entropy_mask, plan.actor.loss_agg_mode)
            reduced["actor/entropy"] = float(entropy)
        return {**reduced, **scalar_metrics}

    def _old_log_probs(self, batch: Batch, timings: dict[str, float]) -> torch.Tensor:
        """The old-log-prob pass (π_old into the batch); returns every row's per-token entropy."""
        with M.timer("old_log_prob", timings):
            out = self.shards.on_shards(
                batch,
                lambda local: self.c.actor.compute_log_prob(
                    local, self._log_prob_batching(), calculate_entropy=True
                ),
            )
        batch["old_log_probs"] = out["old_log_probs"]
        return out["entropys"]

    # ---- helpers -----------------------------------------------------------------------------
    def _generate(
        self, prompts: Batch, params: SamplingParams, stream: int, log_probs: bool = False
    ) -> Batch:
        if self.multi_turn is not None:
            return self.multi_turn.generate(prompts, params, stream, log_probs)
        return generate_sharded(
            prompts,
            self.c.rollout,
            params,
            ranks=self.c.ranks,
            seed=self.plan.trainer.seed,
            stream=stream,
            eos_ids=self.c.rollout.eos_ids,
            pad_id=self.c.rollout.pad_id,
            mrope=MRopeSpec.of(self.c.actor.model.config),
            log_probs=log_probs,
        )

    def _reward_model_scores(self, batch: Batch) -> list[float] | None:
        if self.c.reward_model is None:
            return None
        scorer = self.c.reward_model
        return self.shards.on_shards(batch, lambda local: {"out": scorer.score(local)})[
            "out"
        ].tolist()

    def _log_prob_batching(self) -> MicroBatching:
        rollout = self.plan.rollout
        return MicroBatching(
            rollout.log_prob_micro_batch_size_per_gpu,  # the plan's 0: the whole shard
            rollout.log_prob_use_dynamic_bsz,
            rollout.log_prob_max_token_len_per_gpu,
            self.plan.placement.sp_size,
        )

    def _ref_batching(self) -> MicroBatching:
        ref = self.plan.ref
        return MicroBatching(
            ref.log_prob_micro_batch_size_per_gpu,  # the plan's 0: the whole shard
            ref.log_prob_use_dynamic_bsz,
            ref.log_prob_max_token_len_per_gpu,
            self.plan.placement.sp_size,
        )

    @property
    def _prompt_length(self) -> int:
        return self.plan.rollout.prompt_length

    @property
    def _response_length(self) -> int:
        return self.plan.rollout.response_length

    # ---- validation, weights, checkpoints ----------------------------------------------------
    def validate(self) -> dict[str, float]:
        assert self.c.val_data is not None
        val = self.plan.rollout.val_kwargs
        params = SamplingParams(
            response_length=self._response_length,
            temperature=val.temperature,
            top_k=val.top_k,
            top_p=val.top_p,
            do_sample=val.do_sample,
        )
        samples = self.c.val_data.batch(range(len(self.c.val_data)))
        prompts = prompt_batch(samples, val.n, self._prompt_length, self.c.rollout.pad_id, "val")
        batch = self._generate(prompts, params, stream=VALIDATION_STREAM + self.global_step)
        model_scores = self._reward_model_scores(batch)
        scores, extra = score_batch(batch, self.c.reward_manager, self.c.tokenizer, model_scores)
        return validation_metrics(batch, scores.sum(-1).tolist(), extra, val.n)

    def sync_rollout_weights(self) -> None:
        """Stream the actor's full weights, one tensor at a time, into the rollout engine."""
        self.c.rollout.update_weights(gathered_weights(self.c.actor.model))

    def save_checkpoint(self, step: int) -> Path:
        def write_main_files(tmp: Path) -> None:
            (tmp / "config.json").write_text(self.c.run.to_json())
            hf_dir = tmp / "actor" / "huggingface"
            if self.checkpoints.contents_of("actor").saves("hf_model"):
                hf_dir.parent.mkdir(parents=True, exist_ok=True)
                export_hf_model(self.c.rollout.model, self._hf_processing, hf_dir)
            else:
                write_hf_metadata(self.c.rollout.model, self._hf_processing, hf_dir)

        path = self.checkpoints.save(
            step, train_state(self.c, self.kl_ctrl, step), write_main_files
        )
        self._saved = (step, path)
        return path

    def _resume(self) -> int:
        step_dir = self._checkpoint_to_resume()
        step = 0
        if step_dir is not None:
            step = restore_train_state(self.c, self.checkpoints, step_dir, self.kl_ctrl)
        if self.dynamic is not None and self.plan.trainer.resume_mode != "disable":
            self.dynamic.resume_after(step)  # step 0: the initial weights, as any attempt's
        return step

    def export(self) -> str | None:
        """Merged Hugging Face model of the final policy into `<output_dir>/huggingface/`."""
        if not self.c.ranks.is_main:
            return None
        target = Path(self.plan.paths.hf_export_dir)
        export_hf_model(self.c.rollout.model, self._hf_processing, target)
        logger.info("exported the trained model to %s", target)
        return str(target)

    @property
    def _hf_processing(self) -> Any:
        """What exports save beside the weights: a VL model's processor (its tokenizer and image
        processor, so `AutoProcessor` loads the export), else the tokenizer."""
        return self.c.train_data.processor or self.c.tokenizer


def checkpoint_contents(plan: RunPlan) -> dict[str, Contents]:
    actor, critic = plan.actor.checkpoint, plan.critic.checkpoint
    return {
        "actor": Contents(tuple(actor.save_contents), tuple(actor.load_contents)),
        "critic": Contents(tuple(critic.save_contents), tuple(critic.load_contents)),
    }
