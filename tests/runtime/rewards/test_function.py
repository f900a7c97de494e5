from __future__ import annotations

from pathlib import Path

import pytest

from kuberl_runtime.rewards import RewardError, load_custom_reward_function

ARGS = (["src/a", "src/b"], ["x", "yy"], ["1", "2"], [{"i": 0}, None])

SAMPLE_FN = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None, bonus=0.0):
    return float(len(solution_str) == int(ground_truth)) + bonus
"""


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(RewardError, match=r"custom_reward_function.path .*nope\.py does not exist"):
        load_custom_reward_function(tmp_path / "nope.py")


def test_missing_function_is_reported(write_reward_file) -> None:
    path = write_reward_file(SAMPLE_FN)
    with pytest.raises(
        RewardError, match=r"defines no function 'score_it'.*custom_reward_function.name"
    ):
        load_custom_reward_function(path, "score_it")


def test_import_error_is_reported(write_reward_file) -> None:
    path = write_reward_file("import not_a_module_anywhere\n")
    with pytest.raises(RewardError, match=r"importing custom_reward_function\.path .* failed"):
        load_custom_reward_function(path)


@pytest.mark.parametrize(
    "source",
    [
        "def compute_score(solution, truth):\n    return 0.0\n",
        "def compute_score(data_source, solution_str, ground_truth):\n    return 0.0\n",
        "def compute_score(data_source, solution_str, ground_truth, /, extra_info):\n  return 0\n",
    ],
)
def test_wrong_signature_is_reported(write_reward_file, source: str) -> None:
    with pytest.raises(
        RewardError, match="must accept the keyword arguments data_source, solution_str"
    ):
        load_custom_reward_function(write_reward_file(source))


def test_required_parameter_never_passed_is_reported(write_reward_file) -> None:
    source = (
        "def compute_score(data_source, solution_str, ground_truth, extra_info, lang): return 0"
    )
    with pytest.raises(RewardError, match=r"requires \['lang'\].*reward_kwargs"):
        load_custom_reward_function(write_reward_file(source))
    fn = load_custom_reward_function(write_reward_file(source), reward_kwargs={"lang": "en"})
    assert fn(*ARGS) == [0, 0]


def test_per_sample_function_gets_keywords_and_reward_kwargs(write_reward_file) -> None:
    fn = load_custom_reward_function(write_reward_file(SAMPLE_FN), reward_kwargs={"bonus": 0.5})
    assert not fn.batch
    assert fn(*ARGS) == [1.5, 1.5]


def test_unknown_reward_kwargs_are_reported(write_reward_file) -> None:
    with pytest.raises(RewardError, match=r"does not accept reward_kwargs \['penalty'\]"):
        load_custom_reward_function(write_reward_file(SAMPLE_FN), reward_kwargs={"penalty": 1})


def test_var_keyword_function_accepts_everything(write_reward_file) -> None:
    fn = load_custom_reward_function(
        write_reward_file("def compute_score(**kw):\n    return kw['extra_info']\n"),
        reward_kwargs={"anything": 1},
    )
    assert fn(*ARGS) == [{"i": 0}, None]


def test_batch_function_detected_by_plural_names(write_reward_file) -> None:
    source = """
    calls = []
    def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, scale=1.0):
        calls.append(len(solution_strs))
        return [scale * len(s) for s in solution_strs]
    """
    fn = load_custom_reward_function(
        write_reward_file(source), "compute_score_batch", reward_kwargs={"scale": 2.0}
    )
    assert fn.batch
    assert fn(*ARGS) == [2.0, 4.0]
    assert fn.fn.__globals__["calls"] == [2]  # one call for the whole batch


def test_batch_flag_must_match_signature(write_reward_file) -> None:
    with pytest.raises(RewardError, match="data_sources, solution_strs"):
        load_custom_reward_function(write_reward_file(SAMPLE_FN), batch=True)


def test_batch_result_length_is_checked(write_reward_file) -> None:
    source = "def f(data_sources, solution_strs, ground_truths, extra_infos):\n    return [1.0]\n"
    fn = load_custom_reward_function(write_reward_file(source), "f")
    with pytest.raises(RewardError, match="returned 1 results for 2 responses"):
        fn(*ARGS)


def test_async_functions_work_in_both_forms(write_reward_file) -> None:
    source = """
    async def one(data_source, solution_str, ground_truth, extra_info):
        return len(solution_str)
    async def many(data_sources, solution_strs, ground_truths, extra_infos):
        return [len(s) for s in solution_strs]
    """
    path = write_reward_file(source)
    assert load_custom_reward_function(path, "one")(*ARGS) == [1, 2]
    assert load_custom_reward_function(path, "many")(*ARGS) == [1, 2]


def test_two_files_with_the_same_name_do_not_collide(tmp_path: Path) -> None:
    paths = []
    for value in (1, 2):
        folder = tmp_path / str(value)
        folder.mkdir()
        path = folder / "reward.py"
        path.write_text(f"def compute_score(**kw):\n    return {value}\n")
        paths.append(path)
    assert [load_custom_reward_function(p)(*ARGS)[0] for p in paths] == [1, 2]
