"""ROLL's ``rewards:`` workers: each one kuberl can stand in for, or a refusal that says why.

kuberl scores a row with the rule-based scorer its ``data_source`` names (verl's
``default_compute_score``: GSM8K and MATH answers) or with a verl ``custom_reward_function``.
ROLL's math rule worker checks the final answer of a math response the same way, so it is
accepted with a warning. Every other worker (code execution, an LLM judge, IFEval and
CrossThinkQA rules, detection IoU, ...) scores rows kuberl has no scorer for: the config is
refused at that worker rather than training on rows that would score nothing.
"""

from kuberl_api.roll.draft import Draft
from kuberl_api.roll.models import RewardWorker, RollConfig

_CUSTOM = (
    "or write the job as a verl backend_config whose custom_reward_function.path scores these rows"
)
_RULE = (
    "kuberl has no scorer for {what} (ROLL's {cls}{options}); it scores math answers "
    "(data_source openai/gsm8k, lighteval/MATH, ...) and custom reward functions"
)
_REASONS = {
    "CodeSandboxRewardWorker": (
        "kuberl runs no code-execution sandbox to test generated code (verl's sandbox_fusion "
        "is refused too)"
    ),
    "LLMJudgeRewardWorker": (
        "ROLL's LLMJudgeRewardWorker{options} is not translated: its judge prompt and score "
        "parsing are ROLL's code; kuberl's LLM judge is verl's generative reward model "
        "(reward_model.enable, reward_model.rollout.*, a custom_reward_function that prompts "
        "it, e.g. examples/llm_judge.py) in a verl backend_config"
    ),
    "CrossThinkQARuleRewardWorker": _RULE.replace("{what}", "CrossThinkQA answers"),
    "GeneralRuleRewardWorker": _RULE.replace("{what}", "IFEval instruction following"),
    "DetectionRewardWorker": _RULE.replace("{what}", "detection boxes (IoU)"),
}
_APPROXIMATED = ("MathRuleRewardWorker",)


def map_rewards(cfg: RollConfig, draft: Draft) -> None:
    for name, worker in (cfg.rewards or {}).items():
        cls = worker.worker_cls.rsplit(".", 1)[-1]
        if cls in _APPROXIMATED:
            draft.warn(
                ("rewards", name),
                f"approximated: kuberl scores each response with the rule-based scorer its "
                f"row's data_source names; {cls} is not run",
                "give rows a data_source kuberl scores (e.g. openai/gsm8k) or a custom reward",
            )
            continue
        draft.error(
            ("rewards", name, "worker_cls"),
            _reason(cls, worker),
            f"remove rewards.{name} and the rows it scores{_tags(worker)} from the training "
            f"data, {_CUSTOM}",
            worker.worker_cls,
        )


def _reason(cls: str, worker: RewardWorker) -> str:
    template = _REASONS.get(cls, f"kuberl cannot run ROLL's reward worker {cls}{{options}}")
    return template.format(cls=cls, options=_options(worker))


def _options(worker: RewardWorker) -> str:
    written = {
        "reward_type": worker.reward_type,
        "response_length_penalty_coef": worker.response_length_penalty_coef,
        "judge_model_type": worker.judge_model_type,
        "use_local": worker.use_local,
    }
    shown = [f"{key}: {value}" for key, value in written.items() if value is not None]
    return f" with {', '.join(shown)}" if shown else ""


def _tags(worker: RewardWorker) -> str:
    return f" (tag {', '.join(worker.tag_included)})" if worker.tag_included else ""
