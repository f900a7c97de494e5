import pytest
import torch

from kuberl_runtime.algorithms import (
    UnknownAlgorithmError,
    compute_advantage,
    compute_policy_loss,
    get_advantage_estimator,
    get_policy_loss_fn,
    register_advantage_estimator,
)
from kuberl_runtime.algorithms.registry import Registry

BUILT_IN_ESTIMATORS = (
    "gae",
    "gpg",
    "grpo",
    "grpo_passk",
    "opo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "remax",
    "rloo",
)


def test_unknown_estimator_error_names_every_known_estimator():
    with pytest.raises(UnknownAlgorithmError) as caught:
        get_advantage_estimator("grpoo")
    message = str(caught.value)
    assert "'grpoo'" in message
    for name in BUILT_IN_ESTIMATORS:
        assert name in message
    assert set(BUILT_IN_ESTIMATORS) <= set(caught.value.known)
    # A ValueError, like verl's, so callers catching that keep working.
    assert isinstance(caught.value, ValueError)


def test_unknown_policy_loss_error_names_the_known_losses():
    with pytest.raises(UnknownAlgorithmError, match=r"known: .*gpg.*gspo.*vanilla"):
        get_policy_loss_fn("vanila")
    with pytest.raises(UnknownAlgorithmError):
        compute_policy_loss(
            "nope",
            old_log_prob=torch.zeros(1, 1),
            log_prob=torch.zeros(1, 1),
            advantages=torch.zeros(1, 1),
            response_mask=torch.ones(1, 1),
        )


def test_user_registered_estimator_is_selectable_by_name_with_the_uniform_inputs():
    @register_advantage_estimator("test_only_constant_one")
    def constant_one(*, token_level_rewards, response_mask, gamma, **_):
        ones = torch.ones_like(token_level_rewards) * response_mask * gamma
        return ones, ones

    advantages, returns = compute_advantage(
        "test_only_constant_one",
        token_level_rewards=torch.zeros(2, 3),
        response_mask=torch.tensor([[1, 1, 0], [1, 0, 0]]),
        gamma=2.0,
    )
    torch.testing.assert_close(advantages, torch.tensor([[2.0, 2.0, 0.0], [2.0, 0.0, 0.0]]))
    torch.testing.assert_close(returns, advantages)
    assert get_advantage_estimator("test_only_constant_one") is constant_one


def test_a_name_cannot_be_silently_rebound_to_another_function():
    registry: Registry = Registry("thing")

    def first():
        return 1

    def second():
        return 2

    registry.register("a", "alias")(first)
    registry.register("a")(first)  # same function again is fine (module reload)
    assert registry.get("alias") is first
    with pytest.raises(ValueError, match="already registered"):
        registry.register("a")(second)
