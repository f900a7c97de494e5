"""verl 0.9.1's policy-loss modes, their parameters, the optimizers and the wsd schedule in the
one resolver: each validates and reaches the plan the runtime reads; a mode without the
parameter it cannot run with is an error naming the key, the value and the fix; verl's SAPO
examples' `policy_loss.tau_pos/tau_neg` are read as `actor.tau_pos/tau_neg`."""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberl_api.plan import build_run_plan
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_api.validation.documents import set_dotted

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
A = "actor_rollout_ref.actor."
PL = A + "policy_loss."
MODES = ["clip_cov", "kl_cov", "geo_mean", "cispo", "sapo", "dppo_tv", "dppo_kl", "dro"]


def _validate(settings: dict[str, Any]) -> Any:
    tree = copy.deepcopy(DEMO)
    for key, value in settings.items():
        set_dotted(tree, key, value)
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))


def _plan(settings: dict[str, Any]) -> Any:
    result = _validate(settings)
    assert result.ok, [p.render() for p in result.errors]
    return build_run_plan(result.backend_config)


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_reaches_the_plan(mode):
    extra = {PL + "dro_beta": 0.25} if mode == "dro" else {}
    assert _plan({PL + "loss_mode": mode, **extra}).actor.policy_loss.loss_mode == mode


def test_the_parameters_reach_the_plan_as_written():
    settings = {
        PL + "loss_mode": "clip_cov",
        PL + "clip_cov_ratio": 0.01,
        PL + "clip_cov_lb": -2.0,
        PL + "clip_cov_ub": 7.0,
        PL + "kl_cov_ratio": 0.5,
        PL + "ppo_kl_coef": 1.5,
        PL + "dro_beta": 0.3,
        A + "tau_pos": 2.0,
        A + "tau_neg": 3.0,
    }
    loss = _plan(settings).actor.policy_loss
    assert loss.model_dump() == {
        "loss_mode": "clip_cov",
        "clip_cov_ratio": 0.01,
        "clip_cov_lb": -2.0,
        "clip_cov_ub": 7.0,
        "kl_cov_ratio": 0.5,
        "ppo_kl_coef": 1.5,
        "tau_pos": 2.0,
        "tau_neg": 3.0,
        "dro_beta": 0.3,
    }


def test_verls_defaults_fill_the_plan():
    loss = _plan({}).actor.policy_loss
    assert (loss.clip_cov_ratio, loss.clip_cov_lb, loss.clip_cov_ub) == (0.0002, 1.0, 5.0)
    assert (loss.kl_cov_ratio, loss.ppo_kl_coef, loss.dro_beta) == (0.0002, 0.1, 0.0)
    assert (loss.tau_pos, loss.tau_neg) == (1.0, 1.05)


@pytest.mark.parametrize(
    ("mode", "key", "value"),
    [
        ("dro", "dro_beta", None),
        ("dro", "dro_beta", 0.0),
        ("clip_cov", "clip_cov_ratio", 0.0),
        ("kl_cov", "kl_cov_ratio", 1.5),
        ("kl_cov", "kl_cov_ratio", -0.1),
    ],
)
def test_a_mode_without_the_parameter_it_needs_is_an_error_at_the_key(mode, key, value):
    result = _validate({PL + "loss_mode": mode, PL + key: value})
    (problem,) = [p for p in result.errors if p.path.endswith(PL + key)]
    text = problem.render()
    assert mode in text and key in text and "set it" in text


def test_a_parameter_another_mode_reads_is_not_checked():
    assert _validate({PL + "kl_cov_ratio": 0.0, PL + "dro_beta": -1.0}).ok


def test_sapo_examples_tau_under_policy_loss_is_actor_tau_with_a_warning():
    result = _validate({PL + "loss_mode": "sapo", PL + "tau_pos": 1.5, PL + "tau_neg": 2.5})
    assert result.ok, [p.render() for p in result.errors]
    warned = {p.path.rsplit(".", 1)[-1] for p in result.warnings if "older spelling" in p.message}
    assert {"tau_pos", "tau_neg"} <= warned
    loss = build_run_plan(result.backend_config).actor.policy_loss
    assert (loss.tau_pos, loss.tau_neg) == (1.5, 2.5)


def test_both_tau_spellings_set_differently_is_an_error_naming_both():
    result = _validate({PL + "tau_pos": 1.5, A + "tau_pos": 2.0})
    (problem,) = [p for p in result.errors if p.path.endswith(PL + "tau_pos")]
    assert A + "tau_pos" in problem.render()


def test_cispo_and_dppo_examples_clip_settings_validate():
    cispo = {PL + "loss_mode": "cispo", A + "clip_ratio_low": 10, A + "clip_ratio_high": 0.2}
    assert _plan(cispo).actor.clip_ratio_low == 10.0
    dppo = {
        PL + "loss_mode": "dppo_tv",
        A + "loss_agg_mode": "seq-mean-token-sum-norm",
        A + "clip_ratio_low": 0.15,
        A + "clip_ratio_high": 0.15,
        A + "clip_ratio_c": 10000.0,
    }
    assert _plan(dppo).actor.clip_ratio_c == 10000.0


@pytest.mark.parametrize("role", [A, "critic."])
def test_optimizer_and_wsd_reach_the_plan(role):
    critic = {"algorithm.adv_estimator": "gae", "critic.ppo_micro_batch_size_per_gpu": 4}
    settings = {**critic, role + "optim.optimizer": "SGD", role + "optim.lr_scheduler_type": "wsd"}
    plan = _plan(settings)
    optim = (plan.actor if role == A else plan.critic).optim
    assert (optim.optimizer, optim.lr_scheduler_type) == ("SGD", "wsd")


def test_another_optimizer_implementation_is_refused_with_the_accepted_list():
    result = _validate({A + "optim.optimizer_impl": "bitsandbytes.optim"})
    (problem,) = [p for p in result.errors if p.path.endswith("optimizer_impl")]
    text = problem.render()
    assert "bitsandbytes.optim" in text and "torch.optim" in text and "SGD" in text
