"""The FSDP2 training engine: model building, sharding, log-probs, actor and critic updates."""
