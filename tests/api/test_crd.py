"""The CRD is generated from the models, structural, current, and knows every verl key."""

from pathlib import Path

import pytest
import yaml

from kuberl_api.crd import build_crd, render_crd

CRD_FILE = Path(__file__).parents[2] / "crds" / "rltrainingjobs.kuberl.io.yaml"

# Every key the foundation issue lists, relative to spec.backend_config.
VERL_KEYS = """
data: tokenizer train_files val_files prompt_key image_key max_prompt_length max_response_length
  train_batch_size val_batch_size return_raw_input_ids return_raw_chat shuffle truncation
  filter_overlong_prompts seed
actor_rollout_ref: hybrid_engine
actor_rollout_ref.model: path external_lib external_libs override_config
  enable_gradient_checkpointing use_remove_padding use_fused_kernels use_liger lora_rank lora_alpha
  target_modules trust_remote_code
actor_rollout_ref.actor: strategy ppo_mini_batch_size ppo_micro_batch_size
  ppo_micro_batch_size_per_gpu use_dynamic_bsz ppo_max_token_len_per_gpu grad_clip clip_ratio
  clip_ratio_low clip_ratio_high clip_ratio_c loss_agg_mode entropy_coeff use_kl_loss kl_loss_coef
  kl_loss_type ppo_epochs shuffle ulysses_sequence_parallel_size use_torch_compile
actor_rollout_ref.actor.optim: lr lr_warmup_steps lr_warmup_steps_ratio min_lr_ratio warmup_style
  lr_scheduler_type total_training_steps weight_decay betas
actor_rollout_ref.actor.fsdp_config: param_offload grad_offload optimizer_offload fsdp_size
actor_rollout_ref.actor.fsdp_config.wrap_policy: min_num_params
actor_rollout_ref.actor.checkpoint: save_contents load_contents
actor_rollout_ref.ref: fsdp_config log_prob_micro_batch_size log_prob_micro_batch_size_per_gpu
  log_prob_use_dynamic_bsz
actor_rollout_ref.rollout: name mode temperature top_k top_p do_sample n response_length
  prompt_length dtype gpu_memory_utilization ignore_eos enforce_eager free_cache_engine load_format
  tensor_model_parallel_size max_num_batched_tokens max_num_seqs enable_chunked_prefill
  log_prob_micro_batch_size log_prob_micro_batch_size_per_gpu
actor_rollout_ref.rollout.val_kwargs: temperature top_k top_p do_sample n
critic: optim ppo_mini_batch_size ppo_micro_batch_size_per_gpu cliprange_value loss_agg_mode
  ppo_epochs forward_max_token_len_per_gpu
critic.model: path fsdp_config
reward_model: enable micro_batch_size micro_batch_size_per_gpu max_length reward_manager
reward_model.model: input_tokenizer path external_lib fsdp_config
custom_reward_function: path name
algorithm: gamma lam adv_estimator norm_adv_by_std_in_grpo use_kl_in_reward kl_penalty
algorithm.kl_ctrl: type kl_coef target_kl horizon
trainer: total_epochs total_training_steps project_name experiment_name logger nnodes
  n_gpus_per_node save_freq test_freq val_before_train critic_warmup resume_mode resume_from_path
  default_local_dir default_hdfs_dir max_actor_ckpt_to_keep max_critic_ckpt_to_keep seed
"""


def _listed_keys() -> list[str]:
    keys, node = [], ""
    for line in VERL_KEYS.strip().splitlines():
        if ":" in line:
            node, _, line = line.partition(":")
        keys += [f"{node}.{key}" for key in line.split()]
    return keys


def _schema_at(schema: dict, dotted: str) -> dict:
    for key in dotted.split("."):
        schema = schema["properties"][key]
    return schema


def _spec_schema() -> dict:
    return build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def test_committed_crd_is_current():
    assert CRD_FILE.read_text() == render_crd(), "crds/ is stale: run `make crds`"


@pytest.mark.parametrize("key", _listed_keys())
def test_every_listed_verl_key_is_in_the_crd(key):
    node = _schema_at(_spec_schema()["properties"]["backend_config"], key)
    assert node.get("type") or node.get("x-kubernetes-preserve-unknown-fields")


def test_schema_is_structural():
    def walk(node: dict, path: str) -> None:
        assert "$ref" not in node and "anyOf" not in node and "allOf" not in node, path
        assert node.get("additionalProperties") is not False, path
        typed = (
            node.get("type")
            or node.get("x-kubernetes-int-or-string")
            or node.get("x-kubernetes-preserve-unknown-fields")
        )
        assert typed, f"{path} has no type"
        for key, child in node.get("properties", {}).items():
            walk(child, f"{path}.{key}")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}.*")
        if "items" in node:
            walk(node["items"], f"{path}[]")

    walk(_spec_schema(), "spec")


def test_crd_names_columns_and_status():
    crd = yaml.safe_load(CRD_FILE.read_text())
    names = crd["spec"]["names"]
    assert (names["kind"], names["shortNames"], "all" in names["categories"]) == (
        "RLTrainingJob",
        ["rlj"],
        True,
    )
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"] if "priority" not in c]
    assert columns == ["Phase", "Step", "Progress", "Restarts", "Checkpoint", "Age"]


def test_platform_fields_are_camel_case_and_modelarts_names_are_kept():
    props = _spec_schema()["properties"]
    assert {
        "af_output_dir",
        "backend_config",
        "engine_kwargs",
        "workerPools",
        "runPolicy",
        "imagePullSecrets",
        "storage",
        "scheduling",
        "head",
        "image",
    } <= props.keys()
    pool = props["workerPools"]
    assert pool["x-kubernetes-list-map-keys"] == ["name"]
    assert pool["items"]["properties"]["accelerator"]["properties"]["type"]["enum"] == [
        "nvidia.com/gpu",
        "huawei.com/Ascend910",
        "none",
    ]


def test_numeric_bounds_become_openapi_bounds():
    batch = _schema_at(_spec_schema()["properties"]["backend_config"], "data.train_batch_size")
    assert (batch["minimum"], batch["exclusiveMinimum"], batch["type"]) == (0, True, "integer")
    assert "Default: 1024" in batch["description"]


def test_keys_a_yaml_1_1_reader_takes_for_booleans_are_quoted():
    # kubectl and helm read YAML 1.1: a bare `n:` key (rollout.n) would become `false`.
    text = CRD_FILE.read_text()
    assert "'n':" in text
    assert not any(line.strip() in ("n:", "y:", "on:", "off:") for line in text.splitlines())
