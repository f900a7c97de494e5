"""Supervised fine-tuning on the RL engine: verl 0.9.1's SFT config, run by `kuberl train`."""
