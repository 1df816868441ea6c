"""How a language's environments are inferred, installed, layered and checked: :class:`BuildRecipe`.

The build stage (:mod:`repo2env.runtime.build`) is the same for every language: infer a spec, make
the snapshot, climb the install ladder, build the env layer (dependencies, shared by every task
whose spec is the same) and the task layer (the snapshot as a one-commit repository owned by the
agent), check the task image, record what worked. What differs is asked of the task's profile's
recipe:

- :meth:`BuildRecipe.infer_env_spec` and :meth:`BuildRecipe.install_ladder`: the spec, and the
  fallbacks when it does not install;
- :meth:`BuildRecipe.dependency_fingerprint`: what decides the installed dependencies;
- :meth:`BuildRecipe.own_code`: what the project provides itself, read at the commit (an object
  only the recipe reads), and :meth:`BuildRecipe.prepare_rung`, which keeps a rung's install from
  replacing it;
- :meth:`BuildRecipe.env_layer` / :meth:`BuildRecipe.task_layer`: what the two layers run;
- :meth:`BuildRecipe.check_image`: whether the task image runs the project's own code and its tests
  load, in a sandbox the stage opens, and :meth:`BuildRecipe.image_facts`: what the spec records of
  an image that passed (the test runner's version; the names each hidden test file declares tests
  with, read from the file as a grading restores it);
- :meth:`BuildRecipe.explain_failure` / :meth:`BuildRecipe.packages_needed`: what an install log
  says.

Build steps that may wait on the network without end (a warm-up, a collection check) run under the
watchdog (:func:`watched`; the script is ``repo2env/runtime/watchdog.py``, shipped into every env
image), which stops them after :data:`STALL_IDLE_S` without output, CPU or network progress and says
what they waited on (:func:`watchdog_verdict`).

Base images are named by a *flavour* (``py3.11``, ``node18``: the image ``repo2env/base:<flavour>``),
which a spec carries (:meth:`~repo2env.models.EnvSpec.base_flavour`); ``bases`` are the flavours this
machine has, and a recipe picks the ones it can use.
"""

from __future__ import annotations

import re
import shlex
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from repo2env.languages.files import RepoFiles
from repo2env.models import EnvSpec, ExecResult, Task

#: Where env images keep the tools a recipe ships (probes, reinstall scripts, reporters).
TOOLS_DIR = "/opt/repo2env"
#: How an own-code probe's line starts when the project's own code is not what got installed: the
#: build reports the rest of each such line (the probes are standalone scripts that write it).
OWN_CODE_MARKER = "own-code check failed: "
#: Where env images keep the watchdog (``repo2env/runtime/watchdog.py``), which stops a command that
#: makes no progress.
WATCHDOG = f"{TOOLS_DIR}/watchdog.py"
#: How the watchdog's line starts when it stopped a command (the script writes it; it is standalone).
WATCHDOG_MARKER = "repo2env-watchdog: "
#: How long a build step that waits (on the network, typically) may go without output, CPU or
#: network progress before it is stopped.
STALL_IDLE_S = 60


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain_log(log: str) -> str:
    """A build log as the install wrote it: Docker wraps each chunk of a build's stderr in colour
    codes and puts a line break after each chunk; both dropped give back the tool's own lines."""
    return _ANSI.sub("", log.replace("\x1b[0m\n", ""))


def watched(command: str, *, idle_s: float = STALL_IDLE_S, timeout_s: float | None = None) -> str:
    """``command`` (a shell command line) run under the image's watchdog, by the system Python."""
    limit = f" --timeout {timeout_s:.0f}" if timeout_s else ""
    return f"/usr/bin/python3 -I -S {WATCHDOG} --idle {idle_s:.0f}{limit} -- sh -c {shlex.quote(command)}"


def watchdog_verdict(output: str) -> str | None:
    """What the watchdog said when it stopped a command (its last marker line of ``output``, e.g.
    ``stalled after 60 s without output, CPU or network progress; waiting on host:443 (...)``), or None."""
    lines = [line for line in output.splitlines() if line.lstrip("\x1b[0-9;m").startswith(WATCHDOG_MARKER)]
    return lines[-1].split(WATCHDOG_MARKER, 1)[1].strip()[:300] if lines else None


class Shell(Protocol):
    """What a recipe's image check needs of a sandbox: run a command (a shell string or an argv)."""

    def exec(self, command: str | list[str], timeout: float | None = None) -> ExecResult:
        """Run ``command`` in the sandbox's work tree."""
        ...


class ShellFiles:
    """The files of the work tree of a :class:`Shell` (a sandbox's ``/testbed``) as :class:`RepoFiles`:
    the paths git tracks or would (untracked, not ignored), each file read when asked for."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self._listing: list[str] | None = None

    def listing(self) -> list[str]:
        """Every path in the work tree that git tracks or would track."""
        if self._listing is None:
            listed = self.shell.exec(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], timeout=60)
            self._listing = sorted({path for path in listed.output.split("\0") if path}) if listed.exit_code == 0 else []
        return list(self._listing)

    def read(self, path: str) -> str | None:
        """The text of ``path``, or None when it is not listed or cannot be read."""
        if path not in self.listing():
            return None
        read = self.shell.exec(["cat", "--", path], timeout=60)
        return read.output if read.exit_code == 0 and not read.truncated else None


@dataclass(frozen=True)
class EnvLayer:
    """What the env layer does on its base image, after the build copies the recipe's ``tools`` to
    :data:`TOOLS_DIR` and the repository's files to ``/testbed``.

    ``run`` is one shell command run as root in ``/testbed``: it installs, proves the install is the
    project's own (failing the build otherwise) and leaves ``/testbed`` as the task layer expects it.
    ``build_args`` reach the build as ``ARG`` values (the version the snapshot cannot tell).
    ``labels`` describe the image (``repo2env.python``: ``3.11``); ``base_hint`` says how to make the
    base image when it is missing.
    """

    run: str
    tools: Mapping[str, str] = field(default_factory=dict)
    build_args: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    base_hint: str = ""


@dataclass(frozen=True)
class TaskLayer:
    """What the task layer does after copying the snapshot into ``/testbed`` (owned by the agent):
    ``environment`` becomes ``ENV`` of the image, ``run`` (if any) runs as root in ``/testbed``."""

    environment: Mapping[str, str] = field(default_factory=dict)
    run: str | None = None
    cache_warmup: str | None = None
    """A command run once after ``run``, as the agent in ``/testbed``, to fill the caches the tests
    read (a runner's transform cache; see :func:`repo2env.runtime.images.cache_warmup_lines`): under
    the watchdog, its failure ignored, nothing it writes in the work tree seen in the agent's diff."""


class BuildRecipe(ABC):
    """One language's answers to the build stage (module docstring)."""

    #: A command run once at build time, with network, as the agent in ``/testbed`` when the image
    #: check timed out (tests that download data on first use); None when the language has none.
    warmup_command: str | None = None

    @abstractmethod
    def infer_env_spec(self, files: RepoFiles, commit_date: datetime, override: Any = None,
                       bases: Sequence[str] | None = None, *, touched: Sequence[str] = (),
                       patches: Sequence[str] = ()) -> EnvSpec:
        """The spec to build the repository at a commit with; ``override`` (the repository's
        :class:`~repo2env.languages.python.spec.overrides.EnvOverride`) applied last; ``bases`` the
        base-image flavours available (None: the ones every machine can make); ``touched`` the paths
        the task's change touches (a monorepo's recipe finds the package to test from them);
        ``patches`` the task's gold and test patches (a recipe may install what they add to the
        dependencies). Raises a :class:`~repo2env.errors.Repo2EnvError` when the repository cannot be
        built."""

    @abstractmethod
    def install_ladder(self, spec: EnvSpec, files: RepoFiles, override: Any = None,
                       bases: Sequence[str] | None = None) -> list[tuple[str, EnvSpec]]:
        """The specs to try in order, ``spec`` first, each with its rung name."""

    @abstractmethod
    def dependency_fingerprint(self, files: RepoFiles) -> str:
        """A hash of what decides the installed dependencies at a commit."""

    @abstractmethod
    def own_code(self, files: RepoFiles) -> Any:
        """What the project at the commit provides itself, for this recipe's other methods."""

    def prepare_rung(self, spec: EnvSpec, own: Any) -> EnvSpec:
        """A rung's spec as it is built (by default unchanged)."""
        return spec

    @abstractmethod
    def env_layer(self, spec: EnvSpec, own: Any, scm_version: str, *, agent_uid: int) -> EnvLayer:
        """The env layer of ``spec`` (``agent_uid``: the sandbox user that owns ``/testbed``)."""

    @abstractmethod
    def task_layer(self, spec: EnvSpec, own: Any, task: Task) -> TaskLayer:
        """The task layer of ``task`` on the env layer of ``spec``."""

    @abstractmethod
    def check_image(self, shell: Shell, task: Task, spec: EnvSpec, own: Any, *, log_path: Path,
                    collect_check: bool, timeout_s: float, stall_idle_s: float = STALL_IDLE_S) -> str | None:
        """None when the task image (open in ``shell``) runs the project's own code and, with
        ``collect_check``, the tests the PR touches load; else why not (a line for ``EnvSpec.error``).
        What ran is written to ``log_path``. A reason starting with :data:`COLLECTION_TIMEOUT` or
        :data:`COLLECTION_STALLED` is a hang, which no other install cures; a step that may wait
        without end runs :func:`watched` with ``stall_idle_s``."""

    def image_facts(self, shell: Shell, spec: EnvSpec, task: Task) -> dict[str, Any]:
        """EnvSpec fields read from ``task``'s image (open in ``shell``) that passed its check (by
        default none)."""
        return {}

    def explain_failure(self, log: str, spec: EnvSpec) -> str | None:
        """A short explanation of a failed image build's log (None: the log's own last line says it)."""
        return None

    def rungs_after_failure(self, log: str, failed: tuple[str, EnvSpec],
                            pending: list[tuple[str, EnvSpec]]) -> list[tuple[str, EnvSpec]]:
        """The rungs to try after the image build of rung ``failed`` (name, spec) failed with ``log``
        (by default ``pending``, unchanged): a failure that some rungs would repeat skips them, one
        that a change cures may add the failed rung again with it."""
        return pending

    def packages_needed(self, log: str) -> list[str]:
        """Debian packages a failed install's log asks for (a compiler, headers): the same rung is
        tried again with them."""
        return []

    def shipped_tools(self) -> Mapping[str, str] | None:
        """The tools every env layer of this recipe ships (``EnvLayer.tools``), when they depend on no
        task: a task image whose tools differ (built by an older repo2env) is not reused. None when
        they depend on the task (then the env image's own check rebuilds them when it builds)."""
        return None


#: How a check's failure reason starts when the tests hung (see :meth:`BuildRecipe.check_image`).
COLLECTION_TIMEOUT = "test collection timed out"
#: The same for a collection the watchdog stopped: no output or CPU progress for STALL_IDLE_S.
COLLECTION_STALLED = "test collection stalled"
#: How a warm-up's stall starts its reason (it names the hosts waited on); it ends the ladder.
WARMUP_STALLED = "the warm-up stalled"
