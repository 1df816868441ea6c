"""The one error family of repo2env.

Every error a user can cause or fix is a :class:`Repo2EnvError`; the CLI prints its message on one
line (plus the hint, when there is one) and exits non-zero. Anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations


class Repo2EnvError(Exception):
    """A failure the user can act on. ``hint`` says what to do about it."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class InputError(Repo2EnvError):
    """Bad input from the user: a missing path, a malformed file, an unknown option value."""


class TaskFormatError(InputError):
    """A task row (JSONL line, dataset row) that does not match the schema."""


class SourceError(Repo2EnvError):
    """A repository or API that cannot be read: unknown repo, bad token, no access, empty repo."""


class PatchError(Repo2EnvError):
    """A patch that cannot be parsed or does not apply."""


class BackendUnavailableError(Repo2EnvError):
    """The selected container backend cannot serve here: not installed, no engine answers, or the
    engine failed under a call (see :mod:`repo2env.runtime.backends`)."""


class DockerUnavailableError(BackendUnavailableError):
    """No Docker engine answers, or the base image is missing."""


class SandboxStoppedError(Repo2EnvError):
    """A sandbox whose container stopped under its user: idle too long, over its disk cap, removed."""


class BuildError(Repo2EnvError):
    """An image build or dependency install that failed; ``log_path`` keeps its log."""

    def __init__(self, message: str, *, hint: str | None = None, log_path: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.log_path = log_path


class StoppingError(Repo2EnvError):
    """The process is being stopped (a signal): no new sandbox or image build may start."""

    exit_code = 130


class NotImplementedYetError(Repo2EnvError):
    """A stage that is planned but not built yet. Exit status 2, like a usage error."""

    exit_code = 2


class TaskTimeoutError(Repo2EnvError):
    """An executor's task that ran past its ``Resources.timeout_s`` and was stopped (only that task)."""


class TaskCrashedError(Repo2EnvError):
    """An executor's task whose worker process died under it (a crash, the OOM killer, a kill)."""


class TaskCancelledError(Repo2EnvError):
    """An executor's task stopped by ``shutdown(cancel=True)`` (or a cancel) before it finished."""


class TaskResultError(Repo2EnvError):
    """An executor's task whose result or exception could not travel back to the caller."""
