"""Fates of ``data.*``."""

from kuberl_api.keys.entry import honoured, no_effect, refused
from kuberl_api.keys.where import COMPONENTS, CUSTOM_DATASET, DATASET, INHERIT, PLAN

KEYS = [
    honoured("data.tokenizer", COMPONENTS),
    no_effect("data.use_shm", "shared-memory loading is a load-time speed-up; data is the same"),
    honoured("data.train_files", COMPONENTS),
    honoured("data.val_files", COMPONENTS),
    honoured("data.train_max_samples", COMPONENTS),
    honoured("data.val_max_samples", COMPONENTS),
    honoured("data.prompt_key", COMPONENTS),
    honoured("data.reward_fn_key", COMPONENTS),
    honoured("data.image_key", DATASET),
    # Read to refuse rows that hold videos (video prompts are not supported yet).
    honoured("data.video_key", DATASET),
    honoured("data.max_prompt_length", COMPONENTS),
    honoured("data.max_response_length", PLAN),
    honoured("data.train_batch_size", COMPONENTS),
    no_effect("data.val_batch_size", "deprecated in verl: the whole validation set is one batch"),
    # Prompts per DAPO generation batch; without filter_groups it must equal train_batch_size
    # (validation/rules_filter_groups.py).
    honoured("data.gen_batch_size", COMPONENTS),
    # verl 0.9.1 reads it nowhere (only its config files carry it); a reward model with its own
    # tokenizer re-renders the prompt itself (reward_model.model.input_tokenizer).
    no_effect(
        "data.return_raw_input_ids",
        "verl 0.9.1 reads it nowhere; a reward model with another tokenizer "
        "(reward_model.model.input_tokenizer) re-tokenises the decoded prompt or, with "
        "data.return_raw_chat, the chat messages itself",
    ),
    # The dataset keeps the chat messages (raw_prompt) only when set; a reward model with its
    # own tokenizer re-renders them with its template, else scores the decoded prompt
    # (reward_model.py; tests/runtime/test_return_raw_chat.py).
    honoured("data.return_raw_chat", DATASET),
    no_effect("data.return_full_prompt", "no kuberl component consumes the full prompt"),
    honoured("data.shuffle", COMPONENTS),
    refused("data.validation_shuffle", "kuberl validates in file order; remove it"),
    honoured("data.seed", INHERIT),
    no_effect("data.dataloader_num_workers", "prompts are tokenised in process; speed only"),
    honoured("data.filter_overlong_prompts", COMPONENTS),
    no_effect("data.filter_overlong_prompts_workers", "filtering runs in process; speed only"),
    honoured("data.truncation", COMPONENTS),
    honoured("data.trust_remote_code", COMPONENTS),
    honoured("data.custom_cls.path", CUSTOM_DATASET),
    honoured("data.custom_cls.name", CUSTOM_DATASET),
    honoured("data.apply_chat_template_kwargs", COMPONENTS),
]
