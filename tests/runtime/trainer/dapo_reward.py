"""A reward with constant groups for DAPO's filter: prompts whose answer is even score 1 on every
response (no signal), the others the response's length in characters / 100 (it varies)."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    acc = 1.0 if int(ground_truth) % 2 == 0 else len(solution_str) / 100
    return {"score": acc, "acc": acc}
