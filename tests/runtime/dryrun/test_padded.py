"""The padded path (`use_remove_padding: false`) under the dry run (dryrun/values.py).

Padded forwards read the batch's layout (the first attended column, which rows share a prompt)
before the model runs; on fake tensors those reads used to fail, so a padded job had no memory
plan and the runtime's fail-fast check was skipped. `KnownValues` keeps real values for the small
integer layout tensors: the real engine code answers from them, and the model work stays fake.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensorMode

from kuberl_runtime.dryrun import plan_dry, run_dry
from kuberl_runtime.dryrun.values import MAX_KNOWN_ELEMENTS, KnownValues
from kuberl_runtime.engine.logprob import _first_attended_column
from kuberl_runtime.engine.shared_prefix import prompt_groups
from support.narrow import narrow_job, narrow_qwen25

pytestmark = pytest.mark.skipif(dist.is_initialized(), reason="needs a process without a group")

# Qwen2.5's architecture, narrow and 3 layers deep: the same code path per layer, cheaply.
NARROW = narrow_job(3)


def test_padded_rows_do_the_work_of_packed_rows():
    """Full-length rows padded or packed are the same model work: every phase's FLOPs, collective
    bytes and tokens equal, peaks within 1% (the padded forward's (rows, L) outputs vs the packed
    row's, a few hundred KiB)."""
    packed = run_dry(NARROW)
    padded = run_dry(dataclasses.replace(NARROW, use_remove_padding=False))
    assert [p.name for p in padded.phases] == [p.name for p in packed.phases]
    for mine, theirs in zip(padded.phases, packed.phases, strict=True):
        assert (mine.flops, mine.collective_bytes, mine.tokens) == (
            theirs.flops,
            theirs.collective_bytes,
            theirs.tokens,
        ), mine.name
        assert mine.peak_bytes == pytest.approx(theirs.peak_bytes, rel=0.01), mine.name
    assert padded.phase("update_actor").flops > 0


def test_a_padded_job_gets_a_plan_by_depth():
    """`kuberl plan` (and the runtime's check) for a padded job: extrapolated from 3/4/5 layers,
    the 5-layer check exact, as for packed rows."""
    spec = dataclasses.replace(
        NARROW,
        use_remove_padding=False,
        model_config=narrow_qwen25(8),
    )
    report = plan_dry(spec)
    assert report.method == "measured at 3/4/5 layers, extrapolated to 8; 5-layer check exact"
    assert report.phase("update_actor").peak_bytes > report.phase("init").peak_bytes


def _fake_long(*shape: int) -> torch.Tensor:
    return torch.ones(*shape, dtype=torch.long)


def test_layout_reads_answer_from_known_values():
    with FakeTensorMode(), KnownValues():
        mask = _fake_long(4, 8)
        mask[:, :3] = 0  # left padding, written by an op on known values
        assert _first_attended_column(mask) == 3
        ids = torch.arange(4)[:, None].expand(4, 8) % 2  # rows 0/2 and 1/3 alike
        inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": mask.cumsum(1)}
        groups = prompt_groups(inputs, response_length=2)
        assert groups is not None
        first, inverse = groups
        assert first.shape == (2,)  # the size came from the values
        assert inverse.tolist() == [0, 1, 0, 1]


def test_distinct_rows_share_no_prompt():
    with FakeTensorMode(), KnownValues():
        ids = torch.arange(4)[:, None].expand(4, 8).contiguous()
        mask = _fake_long(4, 8)
        inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": mask.cumsum(1)}
        assert prompt_groups(inputs, response_length=2) is None


def test_values_are_kept_only_for_small_integer_tensors_built_from_values():
    with FakeTensorMode(), KnownValues():
        weights = torch.ones(4)  # float: model work, stays fake
        with pytest.raises(DataDependentOutputException):
            int(weights.argmax())
        big = torch.ones(MAX_KNOWN_ELEMENTS + 1, dtype=torch.long)
        with pytest.raises(DataDependentOutputException):
            int(big.argmax())
        from_weights = (weights > 0).long()  # computed from a fake tensor: no value
        with pytest.raises(DataDependentOutputException):
            bool(from_weights.any())


def test_a_tensor_written_from_unknown_values_forgets_its_value():
    with FakeTensorMode(), KnownValues():
        mask = _fake_long(4, 8)
        assert int(mask.sum()) == 32
        mask.copy_((torch.ones(4, 8) > 0).long())  # the source has no value
        with pytest.raises(DataDependentOutputException):
            int(mask.sum())


def test_a_view_written_from_unknown_values_makes_its_base_forget():
    with FakeTensorMode(), KnownValues():
        mask = _fake_long(4, 8)
        mask[:, :3] = (torch.ones(4, 3) > 0).long()  # the view's new values are unknown
        with pytest.raises(DataDependentOutputException):
            int(mask.sum())


def test_a_plain_tensor_is_its_own_value():
    plain = torch.tensor([2, 5])  # real tensors the dry run is handed (allow_non_fake_inputs)
    one = torch.tensor(7)
    with FakeTensorMode(allow_non_fake_inputs=True), KnownValues():
        assert one.item() == 7
        assert int(plain.amax() - plain[0]) == 3
