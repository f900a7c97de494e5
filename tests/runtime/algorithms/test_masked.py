import math

import pytest
import torch

from kuberl_runtime.algorithms import masked_mean, masked_sum, masked_var, masked_whiten


def test_masked_sum_and_mean_ignore_padding_even_when_it_is_nan():
    values = torch.tensor([[1.0, 2.0, float("nan")], [4.0, float("inf"), 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert masked_sum(values, mask).item() == 7.0  # 1 + 2 + 4
    torch.testing.assert_close(masked_sum(values, mask, dim=-1), torch.tensor([3.0, 4.0]))
    # Σ m·x / (Σ m + 1e-8) = 7 / (3 + 1e-8)
    assert masked_mean(values, mask).item() == pytest.approx(7.0 / (3.0 + 1e-8))


def test_masked_var_is_bessel_corrected_over_all_masked_tokens():
    values = torch.tensor([[1.0, 2.0, 99.0], [3.0, 99.0, 99.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    # tokens 1, 2, 3: μ = 2, biased var = (1 + 0 + 1)/3 = 2/3, × N/(N−1) = 3/2 ⇒ 1
    assert masked_var(values, mask).item() == pytest.approx(1.0)
    assert masked_var(values, mask, unbiased=False).item() == pytest.approx(2.0 / 3.0)


def test_masked_var_refuses_a_single_token():
    with pytest.raises(ValueError, match="at least 2 valid tokens"):
        masked_var(torch.tensor([[5.0, 1.0]]), torch.tensor([[1, 0]]))


def test_masked_whiten_uses_epsilon_inside_the_root():
    values = torch.tensor([[1.0, 2.0, 3.0, 7.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0]])
    # μ = 2, unbiased σ² = 1 ⇒ (x − 2)/√(1 + 1e-8); the padded 7 is shifted too
    expected = (values - 2.0) / math.sqrt(1.0 + 1e-8)
    torch.testing.assert_close(masked_whiten(values, mask), expected)
    torch.testing.assert_close(masked_whiten(values, mask, shift_mean=False), expected + 2.0)
