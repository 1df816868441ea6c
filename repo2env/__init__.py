"""repo2env: merged pull requests -> RL environments for coding agents."""

__version__ = "0.1.0"
