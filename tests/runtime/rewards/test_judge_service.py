"""The judge's endpoint and batcher (rewards/judge.py, judge_http.py) with a stand-in engine:
verl-style judge functions, plain or async, get their chat completions over HTTP, and the
requests of one reward pass reach the engine in batches of up to max_num_seqs (a plain function
runs up to 32 rows side by side); on 2 ranks each rank judges half the rows and both return all
results; bad requests get an OpenAI-style error naming the problem."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import torch.distributed as dist

from kuberl_runtime.rewards.function import RewardFunction, load_custom_reward_function
from kuberl_runtime.rewards.judge import JudgedFunction, JudgeService
from kuberl_runtime.rewards.judge_http import ChatRequest
from support.warm_python import script_env, warm_python

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@dataclass
class LengthJudge:
    """Replies with the last digit of the prompt's length, and records each batch's size."""

    batches: list[int] = field(default_factory=list)
    tokenizer: Any = None
    llm: Any = None

    def complete(self, requests: list[ChatRequest]) -> list[str]:
        self.batches.append(len(requests))
        return [f"score:\n{len(r.messages[-1]['content']) % 10}" for r in requests]

    def wake_up(self) -> None: ...

    def sleep(self) -> None: ...


def _request(solution_str: str) -> dict[str, Any]:
    return {"model": "judge", "messages": [{"role": "user", "content": solution_str}]}


def _parse(reply: dict[str, Any]) -> int:
    return int(reply["choices"][0]["message"]["content"].split("\n")[-1])


def plain_judge(data_source, solution_str, ground_truth, extra_info, reward_router_address):
    url = f"http://{reward_router_address}/v1/chat/completions"
    body = json.dumps(_request(solution_str)).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=body)) as response:
        return float(_parse(json.loads(response.read())))


async def async_judge(data_source, solution_str, ground_truth, extra_info, reward_router_address):
    url = f"http://{reward_router_address}/v1/chat/completions"
    body = _request(solution_str)
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        return {"score": float(_parse(await response.json())), "judged": 1}


def _score(fn: Any, service: JudgeService, rows: int) -> list[Any]:
    kwargs = {"reward_router_address": service.address}
    judged = JudgedFunction(RewardFunction(fn, reward_kwargs=kwargs), service)
    texts = ["x" * n for n in range(rows)]
    return judged(["src"] * rows, texts, ["0"] * rows, [None] * rows)


@pytest.fixture
def service():
    made: list[JudgeService] = []

    def make(max_batch: int) -> JudgeService:
        made.append(JudgeService(LengthJudge(), max_batch))
        return made[-1]

    yield make
    for s in made:
        s.close()


def test_a_plain_function_is_judged_in_batches_of_its_parallel_rows(service):
    judge = service(max_batch=64)
    assert _score(plain_judge, judge, 40) == [float(n % 10) for n in range(40)]
    assert judge.engine.batches == [32, 8]


def test_an_async_function_is_judged_in_batches_of_max_num_seqs(service):
    judge = service(max_batch=16)
    results = _score(async_judge, judge, 40)
    assert [r["score"] for r in results] == [float(n % 10) for n in range(40)]
    assert judge.engine.batches == [16, 16, 8]


def test_a_function_error_reaches_the_trainer(service):
    def broken(data_source, solution_str, ground_truth, extra_info, reward_router_address):
        raise RuntimeError(f"cannot judge {solution_str!r}")

    with pytest.raises(RuntimeError, match="cannot judge"):
        _score(broken, service(max_batch=8), 3)


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v1/completions", _request("a"), 404, "only POST /v1/chat/completions"),
        ("/v1/chat/completions", {"prompt": "a"}, 400, "with a 'messages' list"),
        ("/v1/chat/completions", {**_request("a"), "n": 2}, 400, "n is 2"),
    ],
)
def test_requests_the_judge_cannot_serve_are_answered_with_the_reason(
    service, path, body, status, message
):
    judge = service(max_batch=8)
    request = urllib.request.Request(f"http://{judge.address}{path}", json.dumps(body).encode())
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request)
    assert error.value.code == status
    assert message in json.loads(error.value.read())["error"]["message"]


@dataclass
class ScriptedJudge(LengthJudge):
    """Replies with the prompt's answer line read back as the grade ('7' -> 'Grade: 7')."""

    def complete(self, requests: list[ChatRequest]) -> list[str]:
        self.batches.append(len(requests))
        answers = [r.messages[-1]["content"].split("Answer to grade:\n")[1] for r in requests]
        return [f"Reasoning...\nGrade: {a.splitlines()[0]}" for a in answers]


def test_the_example_judge_function_grades_from_the_last_number(service):
    judge = service(max_batch=8)
    fn = load_custom_reward_function(
        EXAMPLES / "llm_judge.py",
        reward_kwargs={"reward_router_address": judge.address, "max_score": 10},
    )
    judge.engine = ScriptedJudge()
    answers = ["7", "10", "no grade", "11", "2.5"]
    results = JudgedFunction(fn, judge)(["s"] * 5, answers, ["x"] * 5, [{"question": "q"}] * 5)
    assert [r["score"] for r in results] == [0.7, 1.0, 0.0, 0.0, 0.25]
    assert [r["judge_parsed"] for r in results] == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert judge.engine.batches == [5]


def _rank(rank: int, store: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    judge = JudgeService(LengthJudge(), max_batch=64)
    results = _score(plain_judge, judge, 11)
    print(json.dumps({"results": results, "batches": judge.engine.batches}))
    judge.close()
    dist.destroy_process_group()


@pytest.mark.skipif(dist.is_initialized(), reason="spawns its own ranks")
def test_two_ranks_judge_half_each_and_return_every_result(tmp_path):
    env = script_env()
    procs = [
        warm_python().start([__file__, str(rank), str(tmp_path / "store")], env) for rank in (0, 1)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    ranks = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    expected = [float(n % 10) for n in range(11)]
    assert ranks[0]["results"] == ranks[1]["results"] == expected
    assert [r["batches"] for r in ranks] == [[6], [5]]  # rows 0, 2, ..., 10 and 1, 3, ..., 9


if __name__ == "__main__":
    _rank(int(sys.argv[1]), sys.argv[2])
