"""SFT with Ulysses sequence parallelism (`engine.ulysses_sequence_parallel_size`): two ranks as
one SP group (dp 1, sp 2) train exactly like two data-parallel ranks (dp 2, sp 1), through
`kuberl train`, with the validation loss on the way (the runtime logs the dp x sp layout). The
dp 2 side is the session's shared 2-rank SFT run (sft/conftest.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.runtime.sft.conftest import two_rank_sft_config
from tests.runtime.trainer.conftest import (
    assert_same_training,
    read_metrics,
    run_train,
    set_key,
)

pytestmark = pytest.mark.runtime


def test_sp_two_ranks_train_like_dp_two_ranks(
    sft_model_dir, sft_data_dir, two_rank_sft_run, tmp_path
):
    # The dp 2 side: the session's shared 2-rank SFT run of the same config (sft/conftest.py).
    dp_out, dp_log = two_rank_sft_run
    assert "dp 1 x sp 2" not in dp_log, dp_log[-3000:]
    sp_out = tmp_path / "sp2"
    config = two_rank_sft_config(sft_model_dir, sft_data_dir, sp_out)
    set_key(config, "engine.ulysses_sequence_parallel_size", 2)
    set_key(config, "trainer.save_freq", -1)  # checkpoints do not change training: none here
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dp 1 x sp 2" in result.stderr, result.stderr[-3000:]
    assert all("val/loss" in read_metrics(out)[3] for out in (dp_out, sp_out))
    assert_same_training(dp_out, sp_out, list(range(1, 7)))


def test_heads_sp_cannot_split_are_refused_naming_the_sft_key():
    from transformers import Qwen2Config

    from kuberl_runtime.engine.ulysses import UlyssesGroup
    from kuberl_runtime.sft.components import SP_KEY
    from kuberl_runtime.sft.components import ulysses_model as used_by_sft

    config = Qwen2Config(hidden_size=48, num_attention_heads=6, num_key_value_heads=2)
    with pytest.raises(ValueError) as err:
        used_by_sft(UlyssesGroup(None, 4, 0), SP_KEY, lambda: SimpleNamespace(config=config))
    assert str(err.value) == (
        "engine.ulysses_sequence_parallel_size=4: num_attention_heads=6 is not divisible by "
        "it; use a divisor of the model's attention heads"
    )
