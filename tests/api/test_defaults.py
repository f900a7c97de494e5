"""verl's defaults and its "this key follows that one" rules hold in the typed tree."""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.effective import build_effective_backend_config
from kuberl_api.validation import parse_document, validate_document

MINIMAL = {"data": {"train_files": "t.parquet"}, "actor_rollout_ref": {"model": {"path": "/m"}}}


def test_verl_defaults():
    cfg = BackendConfig.model_validate(MINIMAL)
    assert cfg.data.train_batch_size == 1024
    assert cfg.data.max_prompt_length == 512
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 256
    assert cfg.actor_rollout_ref.actor.clip_ratio_c == 3.0
    assert cfg.actor_rollout_ref.actor.kl_loss_type == "low_var_kl"
    assert cfg.algorithm.adv_estimator == "gae"
    assert cfg.algorithm.kl_ctrl.kl_coef == 0.001
    assert cfg.trainer.total_epochs == 30
    assert cfg.critic.optim.lr == 1e-5


def test_inherited_keys_follow_their_source():
    raw = {
        **MINIMAL,
        "data": {"train_files": "t", "max_prompt_length": 64, "max_response_length": 32},
        "actor_rollout_ref": {
            "model": {"path": "/m", "use_remove_padding": False},
            "actor": {
                "use_dynamic_bsz": True,
                "ppo_epochs": 2,
                "loss_agg_mode": "seq-mean-token-mean",
            },
        },
    }
    cfg = BackendConfig.model_validate(raw)
    arr = cfg.actor_rollout_ref
    assert (arr.rollout.prompt_length, arr.rollout.response_length) == (64, 32)
    assert arr.actor.use_remove_padding is False
    assert arr.ref.log_prob_use_dynamic_bsz is True
    assert arr.ref.strategy == "fsdp"
    assert cfg.critic.enable is True  # gae is the default estimator
    assert cfg.critic.model.path == "/m"
    assert cfg.critic.ppo_epochs == 2
    assert cfg.critic.loss_agg_mode == "seq-mean-token-mean"
    assert cfg.data.tokenizer == "/m"
    assert cfg.trainer.default_local_dir == "checkpoints/verl_examples/gsm8k"


def test_explicit_values_beat_inherited_ones():
    raw = {
        **MINIMAL,
        "actor_rollout_ref": {"model": {"path": "/m"}, "rollout": {"response_length": 7}},
    }
    assert BackendConfig.model_validate(raw).actor_rollout_ref.rollout.response_length == 7


def test_deprecated_global_micro_batch_is_converted_per_gpu_with_a_warning():
    raw = {
        "data": {"train_files": "t", "train_batch_size": 16},
        "actor_rollout_ref": {
            "model": {"path": "/m"},
            "actor": {"ppo_mini_batch_size": 8, "ppo_micro_batch_size": 8},
            "rollout": {"name": "hf", "n": 2, "log_prob_micro_batch_size_per_gpu": 2},
        },
        "algorithm": {"adv_estimator": "grpo"},
        "trainer": {"nnodes": 1, "n_gpus_per_node": 4},
    }
    result = validate_document(parse_document(raw))
    assert result.ok, [p.render() for p in result.problems]
    assert result.backend_config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 2
    (warning,) = result.warnings
    assert warning.path == "actor_rollout_ref.actor.ppo_micro_batch_size"
    assert "ppo_micro_batch_size_per_gpu" in warning.hint


def test_clip_ratio_low_and_high_default_to_verls_0_2_so_clip_ratio_alone_changes_nothing():
    """verl 0.9.1: clip_ratio is only the fallback of an explicitly null clip_ratio_low/high."""
    actor = BackendConfig.model_validate(MINIMAL).actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.2)
    tree = {**MINIMAL, "actor_rollout_ref": {**MINIMAL["actor_rollout_ref"]}}
    tree["actor_rollout_ref"]["actor"] = {
        **MINIMAL["actor_rollout_ref"].get("actor", {}),
        "clip_ratio": 0.3,
        "clip_ratio_high": None,
    }
    actor = BackendConfig.model_validate(tree).actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, None)  # null: clip_ratio


def test_effective_config_defaults_to_verl_world_size_without_pools():
    cfg = build_effective_backend_config(BackendConfig.model_validate(MINIMAL))
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (1, 8)
