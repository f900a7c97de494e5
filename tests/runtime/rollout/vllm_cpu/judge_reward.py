"""A generative-reward-model function written as verl 0.9's reward-loop examples write one: a
prompt template, a chat completion posted to `reward_router_address`, the score parsed from the
judge's last line. The tiny judge is untrained, so the request restricts it to one digit
(`allowed_token_ids`, a vLLM sampling field its OpenAI server accepts too). Each call is appended
to `log_path` (JSON lines) for the test to compare with the run's metrics."""

import json

import aiohttp

TEMPLATE = """Grade this answer.

Question: {problem}
Answer: {solution}

Reply with one digit, 0 (wrong) to 9 (fully right), and nothing else."""


async def compute_score(
    data_source, solution_str, ground_truth, extra_info, reward_router_address,
    reward_model_tokenizer, log_path,
):  # fmt: skip
    digits = [reward_model_tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]
    prompt = TEMPLATE.format(problem=ground_truth, solution=solution_str)
    request = {
        "model": "judge",
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 1.0,
        "max_tokens": 1,
        "allowed_token_ids": digits,
    }
    url = f"http://{reward_router_address}/v1/chat/completions"
    async with aiohttp.ClientSession() as session, session.post(url, json=request) as response:
        reply = (await response.json())["choices"][0]["message"]["content"]
    try:
        score = int(reply.strip().split("\n")[-1])
    except ValueError:
        score = 0
    with open(log_path, "a") as log:
        log.write(json.dumps({"solution": solution_str, "reply": reply, "score": score}) + "\n")
    return {"score": float(score), "judge_score": score}
