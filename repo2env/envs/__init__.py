"""The agent's side of an environment: the tool set (bash, file edits, visible tests) over a sandbox,
and :class:`RepoEnv`, a task as an environment for TRL's ``environment_factory``."""

from repo2env.envs.repo_env import RepoEnv, RepoEnvConfig

__all__ = ["RepoEnv", "RepoEnvConfig"]
