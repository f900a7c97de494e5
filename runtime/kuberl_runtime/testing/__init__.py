"""Download-free fixtures for tests and demos: arithmetic data, a tiny tokenizer, tiny models."""
