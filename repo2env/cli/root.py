"""The root ``repo2env`` group and what every command group shares: the two consoles, the ordered
group, the backend (``--backend``), durations, the ``--from`` option and ``--clone`` pairs."""

from __future__ import annotations

import math
import os
from pathlib import Path

import click
from rich.console import Console

from repo2env import __version__
from repo2env.errors import InputError

console = Console(stderr=True, soft_wrap=True)
stdout = Console(soft_wrap=True)


class _Seconds(click.ParamType):
    """A duration in seconds: a finite number above zero (``inf``, ``nan``, 0 and negatives are refused)."""

    name = "seconds"

    def convert(self, value, param, ctx) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"{value!r} is not a duration: give a finite number of seconds above 0", param, ctx)
        return seconds


SECONDS = _Seconds()


class Group(click.Group):
    """Lists commands in the pipeline's order, then in the order they were added."""

    order = ("mine", "build", "run", "grade", "validate", "publish", "pull", "train", "harness", "serve", "import", "export",
             "pipeline", "demo", "doctor",
             "runtime", "images")

    def list_commands(self, ctx: click.Context) -> list[str]:
        ranked = {name: index for index, name in enumerate(self.order)}
        return sorted(self.commands, key=lambda name: (ranked.get(name, len(ranked)), list(self.commands).index(name)))


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="repo2env")
@click.option("--backend", "backend_choice", metavar="docker|podman",
              help="Container backend of every image and sandbox [default: REPO2ENV_BACKEND, else docker].")
@click.pass_context
def cli(ctx: click.Context, backend_choice: str | None) -> None:
    """Turn a repository's merged pull requests into RL environments for coding agents.

    \b
    Pipeline:  mine -> build -> validate -> publish -> train
    Start with: repo2env doctor   (is the container backend ready?)
                repo2env demo run (every built stage on the embedded demo repository)
    """
    ctx.obj = {"backend": None}
    if backend_choice:
        from repo2env.runtime.backends import BACKEND_VARIABLE, backend_name

        ctx.obj["backend"] = backend_name(backend_choice)
        # Worker processes, RepoEnv (TRL builds it without arguments) and any child see it too.
        os.environ[BACKEND_VARIABLE] = ctx.obj["backend"]


def open_selected_backend():
    """The backend this command runs on (``--backend``, else REPO2ENV_BACKEND, else docker), opened."""
    from repo2env.runtime.backends import open_backend

    return open_backend()


def selected_backend_if_any():
    """The selected backend when it runs here, else None (for what only reads images when it can)."""
    from repo2env.errors import BackendUnavailableError

    try:
        return open_selected_backend()
    except BackendUnavailableError:
        return None


def explicit_backend() -> str | None:
    """The backend the command line named (``--backend``), None when it named none."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx else None
    return (root.obj or {}).get("backend") if root else None


from_option = click.option("--from", "from_dirs", type=click.Path(file_okay=False, path_type=Path), multiple=True,
                            help="Task folder(s) with a tasks.jsonl, or folders to search below for them "
                                 "[default: every one under generated/].")


def clone_mapping(clones: tuple[str, ...]) -> dict[str, str]:
    """``--clone OWNER/NAME=PATH`` pairs as {repository: location}."""
    mapping = {}
    for item in clones:
        repo, separator, location = item.partition("=")
        if not separator or "/" not in repo or not location:
            raise InputError(f"--clone {item!r}: expected OWNER/NAME=PATH")
        mapping[repo] = location
    return mapping

