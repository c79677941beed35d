"""Training: configuration, schedules, checkpoints, the training loop and its CLI commands."""
