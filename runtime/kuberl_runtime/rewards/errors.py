"""The error a user gets when a reward function or its configuration is wrong."""


class RewardError(ValueError):
    """A reward problem the user can fix (unknown data_source, bad custom function, bad result)."""
