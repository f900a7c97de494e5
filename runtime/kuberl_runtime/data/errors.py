"""The error a user gets when their data files or data.* settings are wrong."""


class DataError(ValueError):
    """A data problem the user can fix; the message says what is wrong and where."""
