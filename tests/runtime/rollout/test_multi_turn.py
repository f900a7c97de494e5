"""The multi-turn rollout: exact policy tokens, tool context masked out, turn and budget limits.

A scripted policy (each row's turns written in advance) drives the real loop, tokenizer, chat
template and calculator, so every span of the trajectory is known: the test builds the expected
token ids and response mask by hand and compares them with the batch."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from kuberl_runtime.data import PromptSample
from kuberl_runtime.data.tokenize import encode_text
from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.multi_turn import MultiTurnSettings, TurnContext
from kuberl_runtime.rollout.multi_turn_batch import generate_multi_turn
from kuberl_runtime.tools import CalculatorTool, Gsm8kTool
from kuberl_runtime.trainer.batch import Batch

pytestmark = pytest.mark.runtime

TOKENIZER_DIR = Path(__file__).resolve().parents[3] / "examples" / "tokenizer" / "arith-tokenizer"
ONE_RANK = RankInfo(rank=0, world_size=1, local_rank=0)
CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "%s"}}</tool_call>'


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


class ScriptedPolicy:
    """Answers each row's turns from a script (keyed by the row's first prompt token run)."""

    def __init__(self, tokenizer, scripts: dict[str, list], eos: bool = True) -> None:
        """``scripts``: each row's turns, as text or as token ids."""
        self.tokenizer = tokenizer
        self.scripts = scripts
        self.eos = eos
        self.contexts: list[list[int]] = []

    def _row(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(ids)
        return next(key for key in self.scripts if key in text)

    def generate(self, prompts, prompt_mask, params: SamplingParams, seeds) -> torch.Tensor:
        out = torch.full((len(prompts), params.response_length), 0, dtype=torch.long)
        for row, (ids, mask) in enumerate(zip(prompts.tolist(), prompt_mask.tolist(), strict=True)):
            context = [i for i, m in zip(ids, mask, strict=True) if m]
            self.contexts.append(context)
            script = self.scripts[self._row(context)]
            turn = self.tokenizer.decode(context).count("<|im_start|>assistant")
            step = script[turn - 1]
            tokens = list(step) if isinstance(step, list) else encode_text(self.tokenizer, step)
            tokens += [self.tokenizer.eos_token_id] if self.eos else []
            tokens = tokens[: params.response_length]
            out[row, : len(tokens)] = torch.tensor(tokens)
        return out

    def wake_up(self) -> None: ...
    def sleep(self) -> None: ...


def _batch(tokenizer, questions: Sequence[str], **sample) -> Batch:
    samples = []
    for i, question in enumerate(questions):
        messages = [{"role": "user", "content": question}]
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        samples.append(
            PromptSample(
                index=i,
                prompt_ids=encode_text(tokenizer, text),
                data_source="kuberl/arith",
                ground_truth="6",
                raw_prompt=messages,
                agent_name=sample.get("agent_name", "tool_agent"),
                extra_info=sample.get("extra_info", {}),
            )
        )
    return Batch({}, {"sample": samples, "uid": [str(i) for i in range(len(samples))]})


def _run(tokenizer, policy, questions, response_length=200, tools=None, **settings):
    ctx = TurnContext(
        engine=policy,
        tokenizer=tokenizer,
        params=SamplingParams(response_length=response_length),
        eos_ids=[tokenizer.eos_token_id],
        pad_id=tokenizer.pad_token_id,
        tools=tools if tools is not None else {"calculator": CalculatorTool()},
        settings=MultiTurnSettings(**settings),
    )
    seeds = list(range(len(questions)))
    batch = _batch(tokenizer, questions)
    return generate_multi_turn(batch, ctx, ranks=ONE_RANK, row_seeds=seeds, prompt_length=40)


def _ids(tokenizer, text: str) -> list[int]:
    return encode_text(tokenizer, text)


def test_policy_tokens_are_kept_and_only_they_are_trained(tokenizer):
    first, second = "Let me use the tool. " + CALL % "2*3", "It is 6. #### 6"
    policy = ScriptedPolicy(tokenizer, {"apples": [first, second]})
    batch, metrics = _run(tokenizer, policy, ["How many apples?"], max_assistant_turns=5)

    eos = [tokenizer.eos_token_id]
    # By hand: turn 1 as sampled (EOS included), then the template's newline after <|im_end|>,
    # the tool message and the next assistant header, then turn 2 as sampled.
    turn1 = _ids(tokenizer, first) + eos
    tool = _ids(tokenizer, "\n<|im_start|>tool\n6<|im_end|>\n<|im_start|>assistant\n")
    turn2 = _ids(tokenizer, second) + eos
    expected = turn1 + tool + turn2
    row = batch["responses"][0, : len(expected)].tolist()
    assert row == expected
    mask = batch["response_mask"][0].tolist()
    assert mask == [1] * len(turn1) + [0] * len(tool) + [1] * len(turn2) + [0] * (
        200 - len(expected)
    )
    response_attention = batch["attention_mask"][0, -200:].tolist()
    assert response_attention == [1] * len(expected) + [0] * (200 - len(expected))
    # The second turn's context is exactly prompt + turn 1 + tool context.
    assert (
        policy.contexts[1]
        == batch["prompts"][0][batch["prompts"][0] != 0].tolist()[-len(policy.contexts[0]) :]
        + turn1
        + tool
    )
    assert metrics["num_turns/mean"] == 4  # verl's count: user + assistant turns + 1
    assert metrics["tool/calculator/calls"] == 1 and metrics["tool/calculator/failures"] == 0
    assert metrics["multi_turn/tokenization_mismatches"] == 0
    positions = batch["position_ids"][0]
    assert torch.equal(positions[-200:], positions[-201] + torch.arange(1, 201))


def test_rows_advance_together_and_leave_when_done(tokenizer):
    scripts = {
        "apples": ["#### 6"],
        "pears": [CALL % "1+1", CALL % "2+2", "#### 4"],
        "plums": [CALL % "1/0", "#### ?"],
    }
    policy = ScriptedPolicy(tokenizer, scripts)
    batch, metrics = _run(tokenizer, policy, ["apples?", "pears?", "plums?"])
    # Turn 1: three rows; turn 2: pears and plums; turn 3: pears only.
    assert [len(c) > 0 for c in policy.contexts] == [True] * 6
    assert len(policy.contexts) == 3 + 2 + 1
    assert metrics["num_turns/max"] == 6 and metrics["num_turns/min"] == 2
    assert metrics["tool/calculator/calls"] == 3
    assert metrics["tool/calculator/failures"] == 0  # 1/0 is answered with an error text...
    text = tokenizer.decode(batch["responses"][2][batch["attention_mask"][2, -200:].bool()])
    assert "Error: division by zero" in text  # ...which the policy reads


def test_max_assistant_turns_stops_and_counts_the_limit(tokenizer):
    policy = ScriptedPolicy(tokenizer, {"loop": [CALL % "1+1"] * 10})
    batch, metrics = _run(tokenizer, policy, ["loop?"], response_length=600, max_assistant_turns=3)
    assert len(policy.contexts) == 3
    assert metrics["multi_turn/turn_limit_ratio"] == 1.0
    last = int(batch["attention_mask"][0, -600:].sum()) - 1
    assert batch["response_mask"][0, last] == 1  # ends on the policy's tokens


def test_the_length_budget_ends_before_a_tool_context_that_does_not_fit(tokenizer):
    call = CALL % "1+1"
    turn = len(_ids(tokenizer, call)) + 1
    policy = ScriptedPolicy(tokenizer, {"loop": [call] * 10})
    batch, _ = _run(tokenizer, policy, ["loop?"], response_length=turn + 5)
    assert len(policy.contexts) == 1
    assert batch["response_mask"][0].tolist() == [1] * turn + [0] * 5
    assert batch["attention_mask"][0, -(turn + 5) :].tolist() == [1] * turn + [0] * 5


def test_a_turn_cut_by_the_budget_keeps_the_sampled_prefix(tokenizer):
    policy = ScriptedPolicy(tokenizer, {"long": ["#### " + "7" * 50]})
    batch, _ = _run(tokenizer, policy, ["long?"], response_length=10)
    assert batch["responses"][0].tolist() == _ids(tokenizer, "#### " + "7" * 50)[:10]
    assert batch["response_mask"][0].tolist() == [1] * 10


def test_parallel_calls_up_to_max_parallel_calls_and_truncated_responses(tokenizer):
    three = CALL % "10**40" + CALL % "2" + CALL % "3"
    policy = ScriptedPolicy(tokenizer, {"many": [three, "done"]})
    batch, metrics = _run(
        tokenizer,
        policy,
        ["many?"],
        response_length=600,
        max_parallel_calls=2,
        max_tool_response_length=10,
        tool_response_truncate_side="right",
    )
    assert metrics["tool/calculator/calls"] == 2
    text = tokenizer.decode(batch["responses"][0][batch["attention_mask"][0, -600:].bool()])
    assert "<|im_start|>tool\n1000000000...(truncated)<|im_end|>" in text
    assert "<|im_start|>tool\n2<|im_end|>" in text and "tool\n3<" not in text


class SlowTool(CalculatorTool):
    def __init__(self) -> None:
        super().__init__(tool_schema={"type": "function", "function": {"name": "slow"}})

    def execute(self, instance_id, parameters, **kwargs):
        time.sleep(30)
        return "late"


class BrokenTool(CalculatorTool):
    def __init__(self) -> None:
        super().__init__(tool_schema={"type": "function", "function": {"name": "broken"}})

    def execute(self, instance_id, parameters, **kwargs):
        raise RuntimeError("disk on fire")


def test_failures_and_timeouts_are_reported_to_the_policy(tokenizer):
    calls = (
        '<tool_call>{"name": "slow", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "broken", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>'
    )
    policy = ScriptedPolicy(tokenizer, {"tools": [calls, "ok"]})
    tools = {"slow": SlowTool(), "broken": BrokenTool()}
    started = time.perf_counter()
    batch, metrics = _run(
        tokenizer,
        policy,
        ["tools?"],
        response_length=600,
        tools=tools,
        max_parallel_calls=3,
        tool_timeout_s=0.5,
    )
    assert time.perf_counter() - started < 20  # the 30 s tool did not hold the turn
    assert metrics["tool/slow/failures"] == 1 and metrics["tool/broken/failures"] == 1
    assert metrics["tool/nope/failures"] == 1
    text = tokenizer.decode(batch["responses"][0][batch["attention_mask"][0, -600:].bool()])
    assert "timed out after 0.5s" in text and "disk on fire" in text
    assert "unknown tool 'nope'" in text
    assert len(policy.contexts) == 2  # the job went on to the next turn


def test_tools_kwargs_reach_create_and_tool_rewards_are_collected(tokenizer):
    answer = '<tool_call>{"name": "calc_gsm8k_reward", "arguments": {"answer": "%s"}}</tool_call>'
    policy = ScriptedPolicy(tokenizer, {"gsm": [answer % "5", answer % "6", "#### 6"]})
    ctx_tools = {"calc_gsm8k_reward": Gsm8kTool()}
    questions = ["gsm?"]
    ctx = TurnContext(
        engine=policy,
        tokenizer=tokenizer,
        params=SamplingParams(response_length=300),
        eos_ids=[tokenizer.eos_token_id],
        pad_id=tokenizer.pad_token_id,
        tools=ctx_tools,
        settings=MultiTurnSettings(),
    )
    kwargs = {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "6"}}}
    prompts = _batch(tokenizer, questions, extra_info={"tools_kwargs": kwargs})
    batch, _ = generate_multi_turn(prompts, ctx, ranks=ONE_RANK, row_seeds=[0], prompt_length=40)
    text = tokenizer.decode(batch["responses"][0][batch["attention_mask"][0, -300:].bool()])
    assert "reward=0.0" in text and "reward=1.0" in text
    # What the reward function reads in extra_info: verl's num_turns and step rewards (-0.05:
    # no better, 0: better), and the tool's calc_reward at the end; the row's own keys kept.
    info = batch.objects["sample"][0].extra_info
    assert info["num_turns"] == 6 and info["tools_kwargs"] == kwargs
    assert info["tool_rewards"] == [-0.05, 0.0]
    assert info["tool_final_rewards"] == {"calc_gsm8k_reward": 1.0}


def test_single_turn_rows_are_the_single_turn_rollout(tokenizer):
    policy = ScriptedPolicy(tokenizer, {"apples": [CALL % "2*3", "never"]})
    prompts = _batch(tokenizer, ["apples?"], agent_name="single_turn_agent")
    ctx = TurnContext(
        engine=policy,
        tokenizer=tokenizer,
        params=SamplingParams(response_length=100),
        eos_ids=[tokenizer.eos_token_id],
        pad_id=tokenizer.pad_token_id,
        tools={"calculator": CalculatorTool()},
        settings=MultiTurnSettings(),
    )
    _, metrics = generate_multi_turn(prompts, ctx, ranks=ONE_RANK, row_seeds=[0], prompt_length=40)
    assert len(policy.contexts) == 1 and metrics["num_turns/mean"] == 2
    assert "tool/calculator/calls" not in metrics


@pytest.mark.parametrize(
    ("mode", "mismatches"), [("strict", 1), ("ignore_strippable", 0), ("disable", 0)]
)
def test_the_tokenization_sanity_check_in_verls_three_modes(tokenizer, mode, mismatches):
    """The policy writes " apples" as single characters, which the template's tokenization
    merges into one token: the ids differ, the text does not."""
    spelled = [i for ch in " apples" for i in _ids(tokenizer, ch)]
    assert spelled != _ids(tokenizer, " apples")
    answer = _ids(tokenizer, "#### 6") + spelled
    policy = ScriptedPolicy(tokenizer, {"fruit": [CALL % "2*3", answer]})
    batch, metrics = _run(tokenizer, policy, ["fruit?"], tokenization_sanity_check_mode=mode)
    assert metrics["multi_turn/tokenization_mismatches"] == mismatches
    assert spelled == batch["responses"][0][batch["response_mask"][0].bool()].tolist()[-8:-1]


def test_rows_are_batched_so_no_context_outgrows_the_model_length(tokenizer):
    from kuberl_runtime.rollout.multi_turn import Trajectory, _length_groups
    from kuberl_runtime.rollout.tool_calls import ToolSession

    def row(prompt: int, done: int) -> Trajectory:
        return Trajectory("tool_agent", [], [1] * prompt, ToolSession({}), 0, ids=[5] * done)

    ctx = TurnContext(
        engine=None,
        tokenizer=tokenizer,
        params=SamplingParams(response_length=100),
        eos_ids=[2],
        pad_id=0,
        tools={},
        settings=MultiTurnSettings(),
        max_context=140,  # prompt_length 40 + response_length 100
    )
    rows = [row(40, 60), row(10, 0), row(40, 10), row(30, 10)]
    groups = _length_groups(rows, ctx)
    for group in groups:
        room = 100 - min(len(t.ids) for t in group)
        assert all(len(t.prompt_ids) + len(t.ids) + room <= 140 for t in group)
    assert [[(len(t.prompt_ids), len(t.ids)) for t in g] for g in groups] == [
        [(10, 0)],  # room 100: (40, 10) would reach 150
        [(40, 10), (30, 10)],  # room 90
        [(40, 60)],
    ]
    unlimited = TurnContext(**{**ctx.__dict__, "max_context": 0})
    assert len(_length_groups(rows, unlimited)) == 1


def test_every_turn_is_rendered_with_the_datas_chat_template_kwargs():
    loud = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    loud.chat_template = (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + ('!' if loud else '') + '\\n'"
        " + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant' + ('!' if loud else '')"
        " + '\\n' }}{% endif %}"
    )
    policy = ScriptedPolicy(loud, {"apples": [CALL % "2*3", "#### 6"]})
    ctx = TurnContext(
        engine=policy,
        tokenizer=loud,
        params=SamplingParams(response_length=200),
        eos_ids=[loud.eos_token_id],
        pad_id=loud.pad_token_id,
        tools={"calculator": CalculatorTool()},
        settings=MultiTurnSettings(),
        chat_template_kwargs={"loud": True},
    )
    prompts = _batch(loud, ["apples?"])
    batch, metrics = generate_multi_turn(
        prompts, ctx, ranks=ONE_RANK, row_seeds=[0], prompt_length=40
    )
    prompt = loud.decode(batch["prompts"][0][batch["attention_mask"][0, :40].bool()])
    response = loud.decode(batch["responses"][0][batch["attention_mask"][0, 40:].bool()])
    assert prompt.startswith("<|im_start|>user!\napples?")
    assert "<|im_start|>tool!\n6<|im_end|>\n<|im_start|>assistant!\n" in response
    assert metrics["multi_turn/tokenization_mismatches"] == 0


SLOW_FUNCTION = '''import time


def wait(seconds: int) -> str:
    """Sleep, then say so.

    Args:
        seconds: how long to sleep
    """
    time.sleep(seconds)
    return "slept"
'''


def test_the_tool_timeout_key_cuts_a_slow_tool_and_the_rollout_goes_on(tokenizer, tmp_path):
    """``multi_turn.tool_timeout`` (kuberl's key) resolves into the plan and the trainer's
    generator honours it: a 30 s function tool fails at 0.5 s and the row goes on to its answer."""
    import yaml

    from kuberl_api.plan import build_run_plan
    from kuberl_api.validation import Document, DocumentKind, validate_document
    from kuberl_runtime.trainer.multi_turn import MultiTurnGenerator

    tools = tmp_path / "slow.py"
    tools.write_text(SLOW_FUNCTION)
    tree = yaml.safe_load((TOKENIZER_DIR.parents[1] / "demo.yaml").read_text())
    tree["data"]["return_raw_chat"] = True
    rollout = tree["actor_rollout_ref"]["rollout"]
    rollout["multi_turn"] = {"enable": True, "function_tool_path": str(tools), "tool_timeout": 0.5}
    rollout["agent"] = {"default_agent_loop": "tool_agent"}
    result = validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))
    assert result.ok, [p.render() for p in result.errors]
    plan = build_run_plan(result.backend_config)
    assert plan.rollout.multi_turn.tool_timeout == 0.5
    call = '<tool_call>{"name": "wait", "arguments": {"seconds": 30}}</tool_call>'
    policy = ScriptedPolicy(tokenizer, {"slow?": [call, "#### 6"]})
    generator = MultiTurnGenerator(
        plan, policy, tokenizer, ONE_RANK, eos_ids=[tokenizer.eos_token_id], pad_id=0
    )
    batch = generator.generate(_batch(tokenizer, ["slow?"]), SamplingParams(response_length=200), 0)
    metrics = generator.pop_metrics()
    assert metrics["tool/wait/calls"] == 1 and metrics["tool/wait/failures"] == 1
    text = tokenizer.decode(batch["responses"][0])
    assert "timed out after 0.5s" in text and text.count("#### 6") == 1
    assert len(policy.contexts) == 2  # the policy read the failure and answered
