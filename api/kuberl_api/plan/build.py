"""``build_run_plan``: a validated job becomes one frozen, fully resolved ``RunPlan``.

Input is the effective backend_config (placement derived from the pools, deprecated keys
converted: ``kuberl_api.effective``) plus ``af_output_dir``. Every default that follows another
key and every derived number is decided here, once; the runtime reads only the result.
"""

import json
import os
from typing import Any

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.actor import ActorConfig, OptimConfig
from kuberl_api.backend_config.algorithm import AlgorithmConfig
from kuberl_api.backend_config.critic import CriticConfig
from kuberl_api.backend_config.rollout import RolloutConfig
from kuberl_api.plan.common import (
    checkpoint_section,
    file_list,
    fsdp_section,
    model_section,
    optim_section,
    str_or_list,
)
from kuberl_api.plan.filter_groups import filter_groups_section, gen_batch_size
from kuberl_api.plan.multi_turn import multi_turn_section
from kuberl_api.plan.remote_inputs import checkpoint_mirror, paths_section, resume_input
from kuberl_api.plan.reward_judge import JudgePlan, is_generative, judge_section
from kuberl_api.plan.rollout_correction import rollout_correction_section
from kuberl_api.plan.run_plan import RunPlan
from kuberl_api.plan.sections import (
    ActorPlan,
    AlgorithmPlan,
    CriticModelPlan,
    CriticPlan,
    CustomClassPlan,
    DataPlan,
    EngineKwargsPlan,
    KLControlPlan,
    OverlongBufferPlan,
    PathsPlan,
    PlacementPlan,
    PolicyLossPlan,
    RefPlan,
    RewardFunctionPlan,
    RewardModelPlan,
    RolloutPlan,
    RollRLVRPlan,
    SamplingPlan,
    TrainerPlan,
)
from kuberl_api.storage import output_location, output_url


def build_run_plan(effective: BackendConfig, af_output_dir: str | None = None) -> RunPlan:
    placement, arr = _placement(effective), effective.actor_rollout_ref
    paths = _paths(effective, af_output_dir)
    return RunPlan(
        placement=placement,
        paths=paths,
        data=_data(effective),
        model=model_section(effective.actor_rollout_ref.model),
        actor=actor_section(
            arr.actor,
            arr.rollout.n,
            placement.dp_size,
            activation_offload=arr.model.enable_activation_offload,
        ),
        ref=_ref(effective),
        rollout=rollout_section(
            arr.rollout, effective.data.max_prompt_length, effective.data.max_response_length
        ),
        critic=critic_section(effective.critic, arr.model.path),
        reward_model=_reward_model(effective),
        reward_function=_reward_function(effective),
        reward_judge=_reward_judge(effective),
        algorithm=_algorithm(effective),
        rollout_correction=rollout_correction_section(effective),
        trainer=_trainer(effective, paths),
        source=json.loads(effective.model_dump_json()),
    )


def _placement(cfg: BackendConfig) -> PlacementPlan:
    trainer = cfg.trainer
    assert trainer.nnodes and trainer.n_gpus_per_node, "placement is derived"
    world = trainer.nnodes * trainer.n_gpus_per_node
    sp = cfg.actor_rollout_ref.actor.ulysses_sequence_parallel_size
    return PlacementPlan(
        nnodes=trainer.nnodes,
        n_gpus_per_node=trainer.n_gpus_per_node,
        world_size=world,
        device=trainer.device or "auto",
        dp_size=max(world // sp, 1),
        sp_size=sp,
        nccl_timeout=cfg.actor_rollout_ref.nccl_timeout,
    )


def _paths(cfg: BackendConfig, af_output_dir: str | None) -> PathsPlan:
    checkpoint_dir = os.path.abspath(cfg.trainer.default_local_dir or "checkpoints")
    output_dir = (
        os.path.abspath(output_location(af_output_dir)) if af_output_dir else checkpoint_dir
    )
    return paths_section(checkpoint_dir, output_dir, _input_urls(cfg), output_url(af_output_dir))


def _input_urls(cfg: BackendConfig) -> list[str]:
    """The keys that may name a remote model or data file (verl reads them from HDFS too)."""
    data, rm = cfg.data, cfg.reward_model
    return [
        cfg.actor_rollout_ref.model.path,
        data.tokenizer or "",
        *file_list(data.train_files),
        *file_list(data.val_files),
        cfg.critic.model.path or "",
        rm.model.path or "",
        rm.model.input_tokenizer or "",
        resume_input(cfg.trainer.resume_mode, cfg.trainer.resume_from_path),
    ]


def _data(cfg: BackendConfig) -> DataPlan:
    data = cfg.data
    assert data.tokenizer is not None and data.seed is not None, "filled by the models"
    return DataPlan(
        tokenizer=data.tokenizer,
        train_files=file_list(data.train_files),
        val_files=file_list(data.val_files),
        train_max_samples=data.train_max_samples,
        val_max_samples=data.val_max_samples,
        prompt_key=data.prompt_key,
        reward_fn_key=data.reward_fn_key,
        max_prompt_length=data.max_prompt_length,
        max_response_length=data.max_response_length,
        train_batch_size=data.train_batch_size,
        gen_batch_size=gen_batch_size(cfg),
        shuffle=data.shuffle,
        seed=data.seed,
        filter_overlong_prompts=data.filter_overlong_prompts,
        truncation=data.truncation,
        trust_remote_code=data.trust_remote_code,
        return_raw_chat=data.return_raw_chat,
        apply_chat_template_kwargs=dict(data.apply_chat_template_kwargs),
        custom_cls=CustomClassPlan(
            path=data.custom_cls.path or "", name=data.custom_cls.name or ""
        ),
        image_key=data.image_key,
        video_key=data.video_key,
        return_multi_modal_inputs=data.return_multi_modal_inputs,
        mm_processor_kwargs=dict(data.mm_processor_kwargs),
    )


def _clip_grad(optim: OptimConfig, grad_clip: float) -> float:
    """verl 0.9.1's engine clips at optim.clip_grad; the older role-level grad_clip otherwise."""
    return float(optim.clip_grad if "clip_grad" in optim.model_fields_set else grad_clip)


def _policy_loss(actor: ActorConfig) -> PolicyLossPlan:
    loss = actor.policy_loss
    return PolicyLossPlan(
        loss_mode=loss.loss_mode,
        clip_cov_ratio=float(loss.clip_cov_ratio),
        clip_cov_lb=float(loss.clip_cov_lb),
        clip_cov_ub=float(loss.clip_cov_ub),
        kl_cov_ratio=float(loss.kl_cov_ratio),
        ppo_kl_coef=float(loss.ppo_kl_coef),
        tau_pos=float(actor.tau_pos),
        tau_neg=float(actor.tau_neg),
        dro_beta=float(loss.dro_beta or 0.0),
    )


def actor_section(
    actor: ActorConfig, n: int, dp_size: int, *, activation_offload: bool = False
) -> ActorPlan:
    """`n`: rollout.n; `dp_size`: data-parallel ranks (the placement's); `activation_offload`:
    the model's enable_activation_offload."""
    clip = float(actor.clip_ratio)
    return ActorPlan(
        ppo_mini_batch_size=actor.ppo_mini_batch_size,
        ppo_micro_batch_size_per_gpu=actor.ppo_micro_batch_size_per_gpu or 0,
        use_dynamic_bsz=actor.use_dynamic_bsz,
        ppo_max_token_len_per_gpu=actor.ppo_max_token_len_per_gpu,
        mini_batch_rows_per_rank=max(actor.ppo_mini_batch_size * n // dp_size, 1),
        grad_clip=_clip_grad(actor.optim, actor.grad_clip),
        clip_ratio=clip,
        clip_ratio_low=float(actor.clip_ratio_low) if actor.clip_ratio_low is not None else clip,
        clip_ratio_high=float(actor.clip_ratio_high) if actor.clip_ratio_high is not None else clip,
        clip_ratio_c=float(actor.clip_ratio_c),
        policy_loss=_policy_loss(actor),
        loss_agg_mode=actor.loss_agg_mode,
        loss_scale_factor=(
            float(actor.loss_scale_factor) if actor.loss_scale_factor is not None else None
        ),
        entropy_coeff=float(actor.entropy_coeff),
        calculate_entropy=actor.calculate_entropy,
        freeze_vision_tower=actor.freeze_vision_tower,
        use_kl_loss=actor.use_kl_loss,
        kl_loss_coef=float(actor.kl_loss_coef),
        kl_loss_type=actor.kl_loss_type,
        ppo_epochs=actor.ppo_epochs,
        use_remove_padding=bool(actor.use_remove_padding),
        on_policy_shortcut=actor.on_policy_shortcut,
        activation_offload=activation_offload,
        optim=optim_section(actor.optim),
        fsdp_config=fsdp_section(actor.fsdp_config),
        checkpoint=checkpoint_section(actor.checkpoint),
    )


def _ref(cfg: BackendConfig) -> RefPlan:
    arr = cfg.actor_rollout_ref
    ref = arr.ref
    return RefPlan(
        enabled=cfg.needs_reference,
        separate_model=cfg.needs_reference and arr.model.lora_rank == 0,
        log_prob_micro_batch_size_per_gpu=ref.log_prob_micro_batch_size_per_gpu or 0,
        log_prob_use_dynamic_bsz=bool(ref.log_prob_use_dynamic_bsz),
        log_prob_max_token_len_per_gpu=_filled(ref.log_prob_max_token_len_per_gpu),
        fsdp_config=fsdp_section(ref.fsdp_config, trained=False),
    )


def _filled(value: int | None) -> int:
    assert value is not None, "inherited from the actor by the models"
    return value


def _sampling(node: Any) -> SamplingPlan:
    return SamplingPlan(
        temperature=float(node.temperature),
        top_k=node.top_k,
        top_p=float(node.top_p),
        do_sample=node.do_sample,
        n=node.n,
    )


def rollout_section(
    r: RolloutConfig, max_prompt_length: int, max_response_length: int
) -> RolloutPlan:
    """`max_*_length`: data's, the lengths rollout.prompt/response_length follow when unset."""
    prompt_length = r.prompt_length or max_prompt_length
    response_length = r.response_length or max_response_length
    return RolloutPlan(
        name=r.name,
        **_sampling(r).model_dump(),
        ignore_eos=r.ignore_eos,
        prompt_length=prompt_length,
        response_length=response_length,
        dtype=r.dtype,
        gpu_memory_utilization=float(r.gpu_memory_utilization),
        enforce_eager=r.enforce_eager,
        free_cache_engine=r.free_cache_engine,
        load_format=r.load_format,
        tensor_model_parallel_size=r.tensor_model_parallel_size,
        max_num_batched_tokens=r.max_num_batched_tokens,
        max_model_len=r.max_model_len or prompt_length + response_length,
        max_num_seqs=r.max_num_seqs,
        enable_chunked_prefill=r.enable_chunked_prefill,
        enable_prefix_caching=r.enable_prefix_caching,
        disable_log_stats=r.disable_log_stats,
        log_prob_micro_batch_size_per_gpu=r.log_prob_micro_batch_size_per_gpu or 0,
        log_prob_use_dynamic_bsz=bool(r.log_prob_use_dynamic_bsz),
        log_prob_max_token_len_per_gpu=_filled(r.log_prob_max_token_len_per_gpu),
        engine_kwargs=EngineKwargsPlan(vllm=dict(r.engine_kwargs.vllm)),
        val_kwargs=_sampling(r.val_kwargs),
        multi_turn=multi_turn_section(r),
    )


def critic_section(c: CriticConfig, actor_model_path: str) -> CriticPlan:
    """`c` with the keys it inherits from the actor filled (the config models do that)."""
    m = c.model
    assert c.ppo_mini_batch_size and c.ppo_epochs and c.loss_agg_mode, "inherited from the actor"
    return CriticPlan(
        enable=bool(c.enable),
        model=CriticModelPlan(
            path=m.path or actor_model_path,
            override_config=dict(m.override_config),
            external_lib=m.external_lib or "",
            trust_remote_code=m.trust_remote_code,
            enable_gradient_checkpointing=m.enable_gradient_checkpointing,
            use_remove_padding=m.use_remove_padding,
            lora_rank=m.lora_rank,
            lora_alpha=m.lora_alpha,
            target_modules=str_or_list(m.target_modules),
            fsdp_config=fsdp_section(m.fsdp_config),
        ),
        optim=optim_section(c.optim),
        ppo_mini_batch_size=c.ppo_mini_batch_size,
        ppo_micro_batch_size_per_gpu=c.ppo_micro_batch_size_per_gpu or 0,
        forward_micro_batch_size_per_gpu=c.forward_micro_batch_size_per_gpu or 0,
        use_dynamic_bsz=bool(c.use_dynamic_bsz),
        ppo_max_token_len_per_gpu=c.ppo_max_token_len_per_gpu,
        forward_max_token_len_per_gpu=_filled(c.forward_max_token_len_per_gpu),
        ppo_epochs=c.ppo_epochs,
        grad_clip=_clip_grad(c.optim, c.grad_clip),
        cliprange_value=float(c.cliprange_value),
        loss_agg_mode=c.loss_agg_mode,
        loss_scale_factor=float(c.loss_scale_factor) if c.loss_scale_factor is not None else None,
        checkpoint=checkpoint_section(c.checkpoint),
    )


def _reward_model(cfg: BackendConfig) -> RewardModelPlan:
    rm = cfg.reward_model
    return RewardModelPlan(
        enable=rm.enable,
        path=rm.model.path or "",
        trust_remote_code=rm.model.trust_remote_code,
        micro_batch_size_per_gpu=rm.micro_batch_size_per_gpu or 0,
        input_tokenizer=rm.model.input_tokenizer or "",
        fsdp_config=fsdp_section(rm.model.fsdp_config, trained=False),
    )


def _reward_judge(cfg: BackendConfig) -> JudgePlan:
    rm = cfg.reward_model
    enable = is_generative(rm.enable, cfg.custom_reward_function.path, rm.rollout)
    return judge_section(rm.rollout, rm.model.path or "", enable)


def _reward_function(cfg: BackendConfig) -> RewardFunctionPlan:
    fn, kwargs = cfg.custom_reward_function, cfg.reward_model.reward_kwargs
    buffer = kwargs.overlong_buffer_cfg
    return RewardFunctionPlan(
        path=fn.path or "",
        name=fn.name,
        reward_kwargs=dict(fn.reward_kwargs),
        reward_manager=cfg.reward_model.reward_manager or "naive",
        overlong_buffer=OverlongBufferPlan(
            enable=buffer.enable,
            len=buffer.len,
            penalty_factor=float(buffer.penalty_factor),
            log=buffer.log,
        ),
        max_resp_len=kwargs.max_resp_len or 0,
    )


def _algorithm(cfg: BackendConfig) -> AlgorithmPlan:
    a, kl = cfg.algorithm, cfg.algorithm.kl_ctrl
    return AlgorithmPlan(
        gamma=float(a.gamma),
        lam=float(a.lam),
        adv_estimator=a.adv_estimator,
        norm_adv_by_std_in_grpo=a.norm_adv_by_std_in_grpo,
        use_kl_in_reward=a.use_kl_in_reward,
        kl_penalty=a.kl_penalty,
        kl_ctrl=KLControlPlan(
            type=kl.type,
            kl_coef=float(kl.kl_coef),
            horizon=kl.horizon,
            target_kl=float(kl.target_kl),
        ),
        roll_rlvr=_roll_rlvr(cfg.algorithm),
        filter_groups=filter_groups_section(a),
    )


ROLL_OFF = RollRLVRPlan(
    reward_clip=0.0,
    advantage_clip=0.0,
    norm_mean_type="none",
    norm_std_type="none",
    max_len_mask=False,
    difficulty_mask=False,
    difficulty_low_threshold=0.0,
    difficulty_high_threshold=1.0,
)
"""ROLL's RLVR options all off: the runtime then leaves scores and advantages as they are."""


def _roll_rlvr(a: AlgorithmConfig) -> RollRLVRPlan:
    """The options as the runtime applies them: the thresholds only with the difficulty mask,
    and for grpo with any option on, ROLL's group/group score normalisation."""
    mask = a.difficulty_mask
    plan = RollRLVRPlan(
        reward_clip=float(a.reward_clip or 0.0),
        advantage_clip=float(a.advantage_clip or 0.0),
        norm_mean_type=a.norm_mean_type or "none",
        norm_std_type=a.norm_std_type or "none",
        max_len_mask=a.max_len_mask,
        difficulty_mask=mask,
        difficulty_low_threshold=float(a.difficulty_low_threshold) if mask else 0.0,
        difficulty_high_threshold=float(a.difficulty_high_threshold) if mask else 1.0,
    )
    if a.adv_estimator == "grpo" and plan != ROLL_OFF:
        return plan.model_copy(update={"norm_mean_type": "group", "norm_std_type": "group"})
    return plan


def _trainer(cfg: BackendConfig, paths: PathsPlan) -> TrainerPlan:
    t = cfg.trainer
    keep = [k for k in (t.max_actor_ckpt_to_keep, t.max_critic_ckpt_to_keep) if k]
    if t.remove_previous_ckpt_in_save:
        keep.append(1)
    return TrainerPlan(
        total_epochs=t.total_epochs,
        total_training_steps=t.total_training_steps or 0,
        project_name=t.project_name,
        experiment_name=t.experiment_name,
        loggers=t.loggers,
        save_freq=t.save_freq,
        test_freq=t.test_freq,
        val_before_train=t.val_before_train,
        val_only=t.val_only,
        critic_warmup=t.critic_warmup,
        resume_mode=t.resume_mode,
        resume_from_path=t.resume_from_path or "",
        max_ckpt_to_keep=min(keep) if keep else 0,
        checkpoint_mirror=checkpoint_mirror(t.default_hdfs_dir, paths),
        seed=t.seed,
        balance_batch=t.balance_batch,
    )
