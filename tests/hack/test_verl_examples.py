"""hack/verl_examples.py: verl-style launch scripts become backend_configs and are validated.

The scripts under ``data/verl_examples`` were written for this test in the shape of verl v0.9's
launchers (see its README); the measurement over verl's own scripts is in the closing note of
issue 25 (``hack/verl_examples.py <verl checkout>/examples``).
"""

from pathlib import Path

import pytest
import verl_examples

from kuberl_api.yamlio import load_yaml

DATA = Path(__file__).parent / "data" / "verl_examples"
SMALL = DATA / "grpo_trainer" / "run_small_fsdp.sh"


@pytest.fixture(scope="module")
def base() -> dict:
    return load_yaml(verl_examples.verl_generated_config().read_text())


def test_the_trainer_call_is_captured_with_shell_values_expanded():
    arguments = verl_examples.capture_arguments(SMALL)
    assert arguments is not None
    by_key = dict(a.split("=", 1) for a in arguments if "=" in a)
    # The device probe (python3 -c 'import torch_npu') failed: the gpu branch chose TP 1.
    assert by_key["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "1"
    assert by_key["actor_rollout_ref.actor.optim.lr"] == "1e-6"
    assert by_key["trainer.logger"] == '["console","wandb"]'
    home = by_key["data.val_files"].removesuffix("/data/test.parquet")
    assert home.startswith("/") and "$" not in home
    assert by_key["data.train_files"] == f"['{home}/data/a.parquet', '{home}/data/b.parquet']"
    assert "~actor_rollout_ref.rollout.engine_kwargs.trtllm" in arguments


def test_overrides_apply_over_verls_defaults_as_hydra_reads_them(base):
    tree = verl_examples.apply_overrides(
        base,
        [
            "actor_rollout_ref.actor.optim.lr=1e-6",
            "data.train_files=['/a.parquet', '/b.parquet']",
            "+actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=triton",
            "~actor_rollout_ref.rollout.engine_kwargs.trtllm",
            "trainer.logger=[console,wandb]",
            "hydra.run.dir=/tmp/x",
            "actor@actor_rollout_ref.actor=dp_actor",
            "model_engine=fsdp",
        ],
    )
    arr = tree["actor_rollout_ref"]
    assert arr["actor"]["optim"]["lr"] == 1e-6
    assert tree["data"]["train_files"] == ["/a.parquet", "/b.parquet"]
    assert arr["rollout"]["engine_kwargs"]["sglang"] == {"attention_backend": "triton"}
    assert "trtllm" not in arr["rollout"]["engine_kwargs"]
    assert tree["trainer"]["logger"] == ["console", "wandb"]
    assert "hydra" not in tree and "model_engine" not in tree
    assert "trtllm" in base["actor_rollout_ref"]["rollout"]["engine_kwargs"]  # a copy was edited


def test_each_script_is_passed_refused_or_skipped_with_the_reason(base):
    results = {r.script: r for r in verl_examples.check_directory(DATA, base)}
    assert results["grpo_trainer/run_small_fsdp.sh"].status == "pass", results
    spelling = results["grpo_trainer/run_reward_spelling_fsdp.sh"]
    assert spelling.status == "pass", spelling.problems
    offload = results["grpo_trainer/run_offload_fsdp.sh"]
    assert offload.status == "refused"
    assert offload.keys == ["actor_rollout_ref.model.use_liger"]
    assert "Liger kernels are not supported" in offload.problems[0]
    # verl 0.9's engine keys: SP 2 under fsdp_config doubles the token budget (768 x 2 covers
    # 512 + 1024 tokens; read as SP 1 it would be refused), CUDA-graph sizes, prefix grouper,
    # activation offload.
    engine_keys = results["grpo_trainer/run_engine_keys_fsdp.sh"]
    assert engine_keys.status == "pass", engine_keys.problems
    engine = results["grpo_trainer/run_engine_choice.sh"]
    assert (engine.status, engine.detail) == ("skipped", "model_engine=megatron")
    other = results["other/preprocess.sh"]
    assert (other.status, other.detail) == ("skipped", "no verl.trainer.main_ppo call")


def test_the_report_counts_passes_and_tallies_refused_keys(base):
    text = verl_examples.report(verl_examples.check_directory(DATA, base), top=5)
    assert (
        "FSDP trainer scripts: 3/4 validate (75%), 3 of them pass the start checks; "
        "skipped 2, failed to run 0"
    ) in text
    assert "    1 actor_rollout_ref.model.use_liger" in text
