"""Validate a task before it ships: reference rollouts and the patches they grade."""
