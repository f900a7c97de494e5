"""The trainer tests' tiny model, shared with the launcher tests."""

from tests.runtime.trainer.conftest import tiny_model_dir  # noqa: F401 (a fixture)
