"""Each role's model_args, data_args, generating_args and training_args → verl keys.

Absent training_args keys take ROLL's (Hugging Face TrainingArguments') defaults, not verl's,
because that is what the same file would have done under ROLL.
"""

from pathlib import PurePosixPath

from kuberl_api.roll.draft import Draft
from kuberl_api.roll.models import (
    DataArgs,
    GeneratingArgs,
    ModelArgs,
    RollConfig,
    TrainingArgs,
    WorkerConfig,
)

ARR = "actor_rollout_ref"
HF_LEARNING_RATE = 5e-5
HF_WEIGHT_DECAY = 0.0
_ROLLOUT_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_ATTENTION = {"fa2": "flash_attention_2", "sdpa": "sdpa", "eager": "eager"}
DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")


def map_models(cfg: RollConfig, draft: Draft) -> None:
    actor = cfg.actor_train.model_args
    path = actor.model_name_or_path or cfg.pretrain
    origin = ("actor_train", "model_args", "model_name_or_path")
    if path is None:
        draft.error(("pretrain",), "required: the model to train", "set pretrain: /models/...")
        return
    draft.set(f"{ARR}.model.path", path, *(origin if actor.model_name_or_path else ("pretrain",)))
    for role in ("actor_infer", "reference"):
        worker: WorkerConfig | None = getattr(cfg, role)
        other = worker.model_args.model_name_or_path if worker else None
        if other not in (None, path):
            draft.error(
                (role, "model_args", "model_name_or_path"),
                f"{role} must start from the trained model ({path}): kuberl's rollout and "
                "reference are the actor's weights",
                "remove it (pretrain is used) or make it equal",
                other,
            )
    _map_train_model(actor, draft, "actor_train", f"{ARR}.model", f"{ARR}.actor.fsdp_config")
    if cfg.actor_infer.model_args.dtype:
        dtype = _ROLLOUT_DTYPE[cfg.actor_infer.model_args.dtype]
        draft.set(f"{ARR}.rollout.dtype", dtype, "actor_infer", "model_args", "dtype")
    if cfg.reference and cfg.reference.model_args.dtype:
        dtype = cfg.reference.model_args.dtype
        draft.set(f"{ARR}.ref.fsdp_config.dtype", dtype, "reference", "model_args", "dtype")
    for role in ("actor_infer", "reference"):
        worker = getattr(cfg, role)
        if worker is not None:
            _warn_lora(worker.model_args, draft, role)
    if cfg.critic is not None:
        critic = cfg.critic.model_args
        critic_path = critic.model_name_or_path or cfg.reward_pretrain or path
        draft.set("critic.model.path", critic_path, "critic", "model_args", "model_name_or_path")
        _map_train_model(critic, draft, "critic", "critic.model", "critic.model.fsdp_config")
    elif cfg.reward_pretrain is not None:
        draft.warn(
            ("reward_pretrain",),
            "ignored: reward_pretrain starts the critic, and this config has no critic worker",
            "remove it",
            cfg.reward_pretrain,
        )


def _map_train_model(args: ModelArgs, draft: Draft, role: str, model: str, fsdp: str) -> None:
    where = (role, "model_args")
    if args.dtype:
        draft.set(f"{fsdp}.dtype", args.dtype, *where, "dtype")
    draft.set(
        f"{model}.enable_gradient_checkpointing",
        not args.disable_gradient_checkpointing,
        *where,
        "disable_gradient_checkpointing",
    )
    attention = args.attn_implementation or args.flash_attn
    if attention:
        key = "attn_implementation" if args.attn_implementation else "flash_attn"
        draft.set(
            f"{model}.override_config.attn_implementation", _ATTENTION[attention], *where, key
        )
    for roll_key, verl_key in (
        ("lora_rank", "lora_rank"),
        ("lora_alpha", "lora_alpha"),
        ("lora_target", "target_modules"),
    ):
        value = getattr(args, roll_key)
        if value is not None:
            draft.set(f"{model}.{verl_key}", value, *where, roll_key)


def _warn_lora(args: ModelArgs, draft: Draft, role: str) -> None:
    for key in ("lora_rank", "lora_alpha", "lora_target"):
        if getattr(args, key) is not None:
            draft.warn(
                (role, "model_args", key),
                f"ignored: {role} uses actor_train's LoRA settings in kuberl",
                "set LoRA under actor_train.model_args only",
                getattr(args, key),
            )


def map_data(cfg: RollConfig, draft: Draft) -> None:
    data = cfg.actor_train.data_args
    where = ("actor_train", "data_args")
    if data is None or data.file_name is None:
        draft.error((*where, "file_name"), "required: the training prompts", "set file_name")
        return
    draft.set(
        "data.train_files",
        _files(data.file_name, draft, (*where, "file_name")),
        *where,
        "file_name",
    )
    column = _prompt_column(data, draft, where)
    if column:
        draft.set("data.prompt_key", column, *where, "messages" if data.messages else "prompt")
    _check_template(data, draft, where, reference=None)
    if data.dataset_dir is not None:
        draft.warn(
            (*where, "dataset_dir"),
            "ignored: kuberl reads file_name paths as written",
            "put the directory into file_name",
            data.dataset_dir,
        )
    probs = data.domain_interleave_probs or {}
    if len(probs) > 1:
        draft.warn(
            (*where, "domain_interleave_probs"),
            "approximated: kuberl samples rows of all domains uniformly, not by these weights",
            "pre-mix the data file in the ratio you want",
        )
    for role in ("actor_infer", "reference", "critic"):
        worker = getattr(cfg, role)
        if worker is not None and worker.data_args is not None:
            _check_other_role_data(worker.data_args, data, draft, role)
    _map_validation(cfg, draft, column)


def _files(file_name: str | list[str], draft: Draft, where: tuple) -> str | list[str]:
    for name in [file_name] if isinstance(file_name, str) else file_name:
        if PurePosixPath(name).suffix.lower() not in DATA_SUFFIXES:
            draft.error(
                where,
                "kuberl reads JSON, JSONL, CSV and Parquet files",
                f"convert it to one of {', '.join(DATA_SUFFIXES)}",
                name,
            )
    return file_name


def _prompt_column(data: DataArgs, draft: Draft, where: tuple) -> str | None:
    if data.prompt and data.messages:
        draft.error(
            (*where, "messages"),
            f"conflicts with prompt ({data.prompt}): a prompt comes from one column",
            "keep messages (chat messages) or prompt (plain text), not both",
            data.messages,
        )
        return None
    return data.messages or data.prompt


def _check_template(data: DataArgs, draft: Draft, where: tuple, reference: str | None) -> None:
    template = data.template
    if template in (None, "native", reference):
        return
    draft.warn(
        (*where, "template"),
        f"ROLL's '{template}' template is approximated by the tokenizer's own chat template "
        "(ROLL's 'native')",
        "use template: native, or give the tokenizer the chat template you want",
        template,
    )


def _check_other_role_data(data: DataArgs, train: DataArgs, draft: Draft, role: str) -> None:
    _check_template(data, draft, (role, "data_args"), reference=train.template)
    for key in ("file_name", "prompt", "messages", "dataset_dir", "domain_interleave_probs"):
        if getattr(data, key) is not None:
            draft.warn(
                (role, "data_args", key),
                f"ignored: kuberl reads prompts as actor_train.data_args says, not {role}'s",
                "remove it",
            )


def _map_validation(cfg: RollConfig, draft: Draft, train_column: str | None) -> None:
    val = cfg.validation
    if val is None:
        return
    if val.eval_steps is not None:
        draft.set("trainer.test_freq", val.eval_steps, "validation", "eval_steps")
    if val.data_args is not None:
        where = ("validation", "data_args")
        if val.data_args.file_name is not None:
            files = _files(val.data_args.file_name, draft, (*where, "file_name"))
            draft.set("data.val_files", files, *where, "file_name")
        column = _prompt_column(val.data_args, draft, where)
        if column not in (None, train_column):
            draft.error(
                where,
                f"validation prompts come from column {column!r}, training from "
                f"{train_column or 'prompt'!r}; kuberl reads one column for both",
                "use the same column name in both files",
            )
        _check_template(val.data_args, draft, where, reference=cfg.actor_train.data_args.template)
    if val.generating_args is not None:
        _map_val_generation(val.generating_args, cfg, draft)


def _map_val_generation(gen: GeneratingArgs, cfg: RollConfig, draft: Draft) -> None:
    where = ("validation", "generating_args")
    node = f"{ARR}.rollout.val_kwargs"
    _check_beams(gen, draft, where)
    for key in ("temperature", "top_p", "top_k"):
        if getattr(gen, key) is not None:
            draft.set(f"{node}.{key}", getattr(gen, key), *where, key)
    if gen.num_return_sequences is not None:
        draft.set(f"{node}.n", gen.num_return_sequences, *where, "num_return_sequences")
    do_sample = gen.do_sample if gen.do_sample is not None else (gen.temperature or 0) > 0
    draft.set(f"{node}.do_sample", do_sample, *where, "do_sample")
    if gen.max_new_tokens not in (None, cfg.response_length):
        draft.warn(
            (*where, "max_new_tokens"),
            f"approximated by response_length ({cfg.response_length}): kuberl generates "
            "validation responses as long as training ones",
            "remove it",
            gen.max_new_tokens,
        )


def map_generation(cfg: RollConfig, draft: Draft) -> None:
    gen = cfg.actor_infer.generating_args
    if gen is None:
        return
    where = ("actor_infer", "generating_args")
    _check_beams(gen, draft, where)
    if gen.max_new_tokens not in (None, cfg.response_length):
        draft.error(
            (*where, "max_new_tokens"),
            f"differs from response_length ({cfg.response_length}), which kuberl uses for both "
            "generation and training",
            "write max_new_tokens: ${response_length}",
            gen.max_new_tokens,
        )
    n = cfg.num_return_sequences_in_group
    if gen.num_return_sequences not in (None, n):
        draft.error(
            (*where, "num_return_sequences"),
            f"differs from num_return_sequences_in_group ({n})",
            "write num_return_sequences: ${num_return_sequences_in_group}",
            gen.num_return_sequences,
        )
    for key in ("temperature", "top_p", "top_k", "do_sample"):
        if getattr(gen, key) is not None:
            draft.set(f"{ARR}.rollout.{key}", getattr(gen, key), *where, key)


def _check_beams(gen: GeneratingArgs, draft: Draft, where: tuple) -> None:
    if gen.num_beams not in (None, 1):
        draft.error(
            (*where, "num_beams"),
            "beam search is not supported: RL needs sampled responses",
            "set num_beams: 1",
            gen.num_beams,
        )


def map_training_args(cfg: RollConfig, draft: Draft) -> None:
    _map_optim(
        cfg.actor_train.training_args or TrainingArgs(), draft, "actor_train", f"{ARR}.actor"
    )
    if cfg.critic is not None:
        _map_optim(cfg.critic.training_args or TrainingArgs(), draft, "critic", "critic")
    for role in ("actor_infer", "reference"):
        worker = getattr(cfg, role)
        if worker is not None and worker.training_args is not None:
            draft.warn(
                (role, "training_args"),
                f"ignored: {role} does not train",
                "move training settings to actor_train",
            )


def _map_optim(args: TrainingArgs, draft: Draft, role: str, node: str) -> None:
    where = (role, "training_args")
    lr = args.learning_rate if args.learning_rate is not None else HF_LEARNING_RATE
    decay = args.weight_decay if args.weight_decay is not None else HF_WEIGHT_DECAY
    draft.set(f"{node}.optim.lr", lr, *where, "learning_rate")
    draft.set(f"{node}.optim.weight_decay", decay, *where, "weight_decay")
    if args.warmup_steps is not None:
        draft.set(f"{node}.optim.lr_warmup_steps", args.warmup_steps, *where, "warmup_steps")
    if args.warmup_ratio is not None:
        draft.set(f"{node}.optim.lr_warmup_steps_ratio", args.warmup_ratio, *where, "warmup_ratio")
    if args.lr_scheduler_type is not None:
        schedule = "cosine" if args.lr_scheduler_type == "cosine" else "constant"
        draft.set(f"{node}.optim.lr_scheduler_type", schedule, *where, "lr_scheduler_type")
    if args.max_grad_norm is not None:
        draft.set(f"{node}.grad_clip", args.max_grad_norm, *where, "max_grad_norm")
    if args.num_train_epochs is not None:
        draft.warn(
            (*where, "num_train_epochs"),
            "ignored: a ROLL RL pipeline runs max_steps steps",
            "remove it; set max_steps",
            args.num_train_epochs,
        )
