"""Stage runner: chains the stages over tasks (today: the demo run)."""
