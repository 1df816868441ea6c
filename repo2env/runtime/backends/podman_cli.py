"""The podman command line as the podman backend calls it: one subprocess per engine call, podman's
own failures told apart from the command's, names written the way every backend writes them."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

from repo2env.errors import BackendUnavailableError
from repo2env.runtime.backends.container import plain_name


class PodmanFailed(Exception):
    """A podman call that exited non-zero; ``stderr`` is what podman said."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"podman {' '.join(args[:2])} failed (exit {returncode}): {last_error(stderr)}")
        self.returncode = returncode
        self.stderr = stderr


class PodmanCLI:
    """Runs ``podman ARGS`` (the binary ``command``)."""

    def __init__(self, command: str = "podman") -> None:
        found = shutil.which(command)
        if found is None:
            raise BackendUnavailableError(f"podman is not installed ({command!r} is not on PATH)",
                                          hint="apt-get install podman catatonit (Debian/Ubuntu), or set REPO2ENV_PODMAN")
        self.binary = found

    def run(self, args: Sequence[str], *, input: bytes | None = None, timeout: float | None = 600.0,
            cwd: str | None = None) -> bytes:
        """podman's stdout; :class:`PodmanFailed` when it exits non-zero, a BackendUnavailableError
        when it cannot be run or hangs past ``timeout``."""
        try:
            done = subprocess.run([self.binary, *args], input=input, capture_output=True, timeout=timeout, cwd=cwd)
        except subprocess.TimeoutExpired:
            raise BackendUnavailableError(f"podman {' '.join(args[:2])} did not answer within {timeout:.0f} s",
                                          hint="check 'podman info'; a stuck engine lock clears with 'podman system renumber'") from None
        except OSError as exc:
            raise BackendUnavailableError(f"cannot run {self.binary}: {exc}") from None
        if done.returncode != 0:
            raise PodmanFailed(args, done.returncode, done.stderr.decode("utf-8", errors="replace"))
        return done.stdout

    def json(self, args: Sequence[str], *, timeout: float | None = 600.0) -> Any:
        """podman's stdout parsed as JSON (``--format json`` calls)."""
        return json.loads(self.run(args, timeout=timeout) or b"null")

    def popen(self, args: Sequence[str], **options: Any) -> subprocess.Popen:
        """``podman ARGS`` started, for calls whose streams the caller reads itself."""
        try:
            return subprocess.Popen([self.binary, *args], **options)
        except OSError as exc:
            raise BackendUnavailableError(f"cannot run {self.binary}: {exc}") from None


@functools.cache
def conmon_cwd() -> str:
    """The folder a sandbox's container is started from: its conmon keeps that working folder and
    writes an ``oom`` file there when a process in the container is killed for memory, which would
    otherwise land in the user's folder."""
    folder = os.path.join(tempfile.gettempdir(), f"repo2env-podman-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def local_name(name: str) -> str:
    """A name as every backend writes it (``localhost/repo2env/base:py3.11`` -> ``repo2env/base:py3.11``)."""
    return plain_name(name)


def last_error(stderr: str) -> str:
    """podman's last ``Error:`` message, the lines of a multi-error with it (else its last line)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    starts = [index for index, line in enumerate(lines) if line.startswith("Error:")]
    message = " ".join(lines[starts[-1]:]) if starts else (lines or [""])[-1]
    return message.removeprefix("Error: ")[:300]


def not_found(stderr: str) -> bool:
    """Whether podman's message says the image, container or path does not exist."""
    text = stderr.lower()
    return any(words in text for words in ("no such container", "image not known", "no such image", "not found",
                                           "could not be found", "no such file or directory", "does not exist"))
