"""The PPO/GRPO training loop (SPMD: every rank runs it) in verl's step order."""
