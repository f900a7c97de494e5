"""A reward a random tiny model learns fast: the share of response characters that are digits."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if not solution_str:
        return 0.0
    return sum(ch.isdigit() for ch in solution_str) / len(solution_str)
