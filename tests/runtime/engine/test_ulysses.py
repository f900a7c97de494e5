"""Ulysses sequence parallelism equals one rank: 2 and 4 gloo ranks, SP 2 and 4 (dp 1 and 2).

Rank 0 runs the whole batch on a plain model (no SP, no FSDP, fixed micro-batches) as the
oracle; then every rank runs its DP rows through the SP engine (FSDP over the world, a (dp, sp)
mesh, the Ulysses attention): the
actor's old log-probs and entropy, the reference's log-probs, the critic's values, and after one
update the actor's and critic's loss metrics and full gradients must equal the oracle's to fp32
tolerance, for packed (`use_remove_padding`, token budgets, gradient checkpointing) and padded rows
(fixed micro-batches).
The tiny model has 4 query heads and 2 KV heads: SP 4 replicates the KV heads (verl's rule).
"""

from __future__ import annotations

import datetime
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from transformers import AutoTokenizer

from kuberl_api.plan.standalone import actor_plan, critic_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine import actor as actor_module
from kuberl_runtime.engine import critic as critic_module
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.critic import Critic
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.micro import MicroBatching
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm, build_value_model
from kuberl_runtime.engine.ulysses import NO_SP, build_ulysses_group, use_ulysses_attention
from kuberl_runtime.trainer.batch import Batch
from support.sp_oracle import assert_close, capture_grads, mean_over_ranks, on_rank0
from support.warm_python import script_env, warm_python

if __package__:
    from tests.runtime.engine.conftest import TOKENIZER_DIR, fixed_batch
else:  # a rank started by the test below runs this file as a script, beside conftest.py
    from conftest import TOKENIZER_DIR, fixed_batch  # type: ignore[no-redef]

pytestmark = pytest.mark.runtime

CPU = Device("cpu")
ROWS = 8
MICRO = {  # one packed case with token budgets, one padded with fixed micro-batches
    True: {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 40},
    False: {"ppo_micro_batch_size_per_gpu": 3},
}
ORACLE_MICRO = {"use_dynamic_bsz": False, "ppo_micro_batch_size_per_gpu": 3}  # no collectives


def _batch(tokenizer) -> Batch:
    batch = fixed_batch(tokenizer, rows=ROWS, prompt_length=13, response_length=10)
    gen = torch.Generator().manual_seed(1)
    mask = batch["response_mask"]
    for key in ("old_log_probs", "ref_log_prob"):
        batch[key] = (-torch.rand(mask.shape, generator=gen) * 4 - 4) * mask
    batch["values"] = torch.randn(mask.shape, generator=gen) * mask
    batch["returns"] = torch.randn(mask.shape, generator=gen) * mask
    batch["advantages"] = batch["advantages"] * 3
    return batch


def _actor_oracle(spec, node, packed, ref_model):
    """One rank, a plain model, fixed micro-batches: what the SP actor must reproduce."""
    batch = _batch(AutoTokenizer.from_pretrained(TOKENIZER_DIR))
    settings = ActorSettings(1.0, packed, 1, world_size=1, total_training_steps=1)
    node = {**node, **ORACLE_MICRO}
    oracle = Actor(build_causal_lm(spec), actor_plan(node), settings, ref_model=ref_model)
    budget = MicroBatching(2, False)
    steps = capture_grads(actor_module)
    return {
        **oracle.compute_log_prob(batch, budget, calculate_entropy=True),
        "ref_log_prob": oracle.compute_ref_log_prob(batch, budget),
        "metrics": oracle.update_policy(batch),
        "grads": steps[0],
    }


def _check_actor(model_dir, tokenizer, sp, dp, dp_rank, packed):
    batch = _batch(tokenizer)
    node = {
        "ppo_mini_batch_size": ROWS,
        "ppo_epochs": 1,
        "loss_agg_mode": "token-mean",
        "entropy_coeff": 0.01,
        "use_kl_loss": True,
        "kl_loss_coef": 0.5,
        **MICRO[packed],
    }
    spec = ModelSpec(path=str(model_dir))
    ref = build_causal_lm(spec).requires_grad_(False)
    torch.manual_seed(7)  # the reference differs from the actor
    for p in ref.parameters():
        p.add_(torch.randn_like(p) * 0.02)
    want = on_rank0(lambda: _actor_oracle(spec, node, packed, ref))

    # Packed: the SP actor also recomputes its layers in backward (gradient checkpointing), so
    # the attention's collectives run again there.
    model = build_causal_lm(replace(spec, enable_gradient_checkpointing=packed))
    for m in (model, ref):
        use_ulysses_attention(m)
    plan = actor_plan(node, dp_size=dp)
    model = apply_fsdp(model, plan.fsdp_config, CPU)
    ref = apply_fsdp(ref, plan.fsdp_config, CPU)
    settings = ActorSettings(1.0, packed, 1, world_size=dp, total_training_steps=1, sp=sp)
    actor = Actor(model, plan, settings, ref_model=ref)

    rows = list(range(dp_rank * ROWS // dp, (dp_rank + 1) * ROWS // dp))
    local = batch.select(rows)
    mask = local["response_mask"].bool()
    sp_budget = MicroBatching(2, False, sp_size=sp.size)
    got = actor.compute_log_prob(local, sp_budget, calculate_entropy=True)
    got["ref_log_prob"] = actor.compute_ref_log_prob(local, sp_budget)
    for key in ("old_log_probs", "entropys", "ref_log_prob"):
        assert_close(got[key][mask], want[key][rows][mask], key)

    steps = capture_grads(actor_module)
    got_metrics = actor.update_policy(local)
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/entropy"):
        assert_close(mean_over_ranks(got_metrics[key][0]), want["metrics"][key][0], key)
    assert steps[0].keys() == want["grads"].keys()
    for name, grad in steps[0].items():
        assert_close(grad, want["grads"][name], f"actor grad {name}")


def _critic_oracle(spec, node):
    batch = _batch(AutoTokenizer.from_pretrained(TOKENIZER_DIR))
    torch.manual_seed(3)
    plan = critic_plan({**node, **ORACLE_MICRO, "forward_micro_batch_size_per_gpu": 3})
    model = build_value_model(spec)
    oracle = Critic(model, plan, rollout_n=1, world_size=1, total_training_steps=1)
    steps = capture_grads(critic_module)
    values = oracle.compute_values(batch)
    return {"values": values, "metrics": oracle.update_critic(batch), "grads": steps[0]}


def _check_critic(model_dir, tokenizer, sp, dp, dp_rank, packed):
    batch = _batch(tokenizer)
    node = {
        "ppo_mini_batch_size": ROWS,
        "ppo_epochs": 1,
        "loss_agg_mode": "token-mean",
        "forward_max_token_len_per_gpu": 40,
        "cliprange_value": 0.3,
        "model": {"use_remove_padding": packed},
        **MICRO[packed],
    }
    spec = ModelSpec(path=str(model_dir))
    want = on_rank0(lambda: _critic_oracle(spec, node))
    torch.manual_seed(3)  # the same value head as the oracle's
    model = build_value_model(spec)
    use_ulysses_attention(model)
    plan = critic_plan({**node, "forward_micro_batch_size_per_gpu": 3})
    model = apply_fsdp(model, plan.model.fsdp_config, CPU)
    critic = Critic(model, plan, rollout_n=1, world_size=dp, total_training_steps=1, sp=sp)

    rows = list(range(dp_rank * ROWS // dp, (dp_rank + 1) * ROWS // dp))
    local = batch.select(rows)
    mask = local["response_mask"].bool()
    assert_close(critic.compute_values(local)[mask], want["values"][rows][mask], "values")
    steps = capture_grads(critic_module)
    got = critic.update_critic(local)
    vf_loss = mean_over_ranks(got["critic/vf_loss"][0])
    assert_close(vf_loss, want["metrics"]["critic/vf_loss"][0], "vf_loss")
    assert steps[0].keys() == want["grads"].keys()
    for name, grad in steps[0].items():
        assert_close(grad, want["grads"][name], f"critic grad {name}")


def _rank(rank: int, world: int, sp_size: int, store: str, model_dir: str) -> None:
    torch.set_num_threads(1)
    # A rank that fails leaves its peers waiting in a collective: they give up after a minute.
    dist.init_process_group(
        "gloo",
        init_method=f"file://{store}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
        sp = build_ulysses_group(sp_size, "cpu")
        assert sp.size == sp_size and sp.rank == rank % sp_size  # contiguous SP groups
        dp, dp_rank = world // sp_size, rank // sp_size
        for packed in (True, False):
            _check_actor(model_dir, tokenizer, sp, dp, dp_rank, packed)
            _check_critic(model_dir, tokenizer, sp, dp, dp_rank, packed)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(("world", "sp"), [(2, 2), (4, 2), (4, 4)])
def test_sequence_parallel_equals_one_rank(world, sp, tiny_model_path: Path, tmp_path):
    store = tmp_path / "store"
    env = script_env()
    args = [str(world), str(sp), str(store), str(tiny_model_path)]
    ranks = [
        warm_python().start([__file__, str(rank), *args], env, merge_stderr=True)
        for rank in range(world)
    ]
    outputs = [process.communicate(timeout=300)[0] for process in ranks]
    failed = [
        f"rank {rank}:\n{output[-3000:]}"
        for rank, (process, output) in enumerate(zip(ranks, outputs, strict=True))
        if process.returncode != 0
    ]
    assert not failed, "\n".join(failed)


def test_no_sp_is_the_plain_forward():
    assert NO_SP.size == 1 and NO_SP.group is None


if __name__ == "__main__":
    rank_, world_, sp_, store_, model_dir_ = sys.argv[1:]
    _rank(int(rank_), int(world_), int(sp_), store_, model_dir_)


@pytest.mark.parametrize(
    ("heads", "kv_heads", "sp", "why"),
    [
        (4, 2, 2, None),
        (4, 2, 4, None),  # KV heads replicated
        (6, 2, 4, "num_attention_heads=6 is not divisible by it"),
        (8, 3, 4, "num_key_value_heads=3 neither divides nor is divisible by it"),
    ],
)
def test_heads_must_split_over_the_sp_group(heads, kv_heads, sp, why):
    from types import SimpleNamespace

    from kuberl_runtime.engine.ulysses import UlyssesGroup, check_heads
    from kuberl_runtime.trainer.components import with_sp

    assert check_heads(heads, kv_heads, sp) == why
    if why is None:
        return
    config = SimpleNamespace(num_attention_heads=heads, num_key_value_heads=kv_heads)
    with pytest.raises(ValueError) as err:
        with_sp(UlyssesGroup(None, sp, 0), lambda: SimpleNamespace(config=config))
    assert str(err.value) == (
        f"actor_rollout_ref.actor.ulysses_sequence_parallel_size={sp}: {why}; "
        "use a divisor of the model's attention heads"
    )
