"""The machine and its runtime: ``repo2env doctor``, ``runtime``, ``images`` and ``run`` (a command
in a task's sandbox)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click
from rich.table import Table

from repo2env import defaults
from repo2env.cli.root import SECONDS, Group, cli, console, from_option, open_selected_backend, stdout
from repo2env.errors import Repo2EnvError


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(as_json: bool) -> None:
    """Check the container backends (one line each), the selected one's base images and what builds
    will be given (CA bundle, index); remove sandboxes whose repo2env process died without removing them."""
    from repo2env.runtime.doctor import diagnose

    report = diagnose()
    if as_json:
        stdout.print_json(json.dumps(report.as_dict()))
    else:
        table = Table(title="repo2env doctor")
        for column in ("check", "", "detail", "to fix"):
            table.add_column(column)
        for check in report.checks:
            table.add_row(check.name, "[green]ok[/]" if check.ok else "[red]no[/]", check.detail, "" if check.ok else check.fix)
        stdout.print(table)
        stdout.print("[green]ready[/]" if report.ready else "[red]not ready[/]: see 'to fix'")
    sys.exit(0 if report.ready else 1)


@cli.group(cls=Group)
def runtime() -> None:
    """The container backend: base images."""


@runtime.command("bootstrap")
@click.option("--python", "python_versions", multiple=True,
              help="Python X.Y of the base image (repeatable) [default: 3.11]: pulled when a registry answers, else "
                   "3.9/3.11/3.13 from Debian packages, any other from a local CPython (see 'repo2env doctor').")
@click.option("--python-from", "python_from", multiple=True, type=click.Path(exists=True),
              help="Make the image from this local CPython (an interpreter or its prefix; repeatable); its X.Y is "
                   "the image's.")
@click.option("--force", is_flag=True, help="Rebuild even if the image exists.")
@click.option("--no-pull", is_flag=True, help="Do not try a registry; build from Debian packages or a local CPython.")
@click.option("--mirror", default=None, help="Debian mirror for debootstrap (default: deb.debian.org).")
@click.option("--node", "node_versions", multiple=True,
              help="Also a Node base image of this major (repeatable: 12, 18, 20 from Debian; others from a local Node).")
@click.option("--node-prefix", "node_prefixes", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="A local Node installation (with bin/node and lib/node_modules/npm) to copy in for its major.")
def runtime_bootstrap(python_versions: tuple[str, ...], python_from: tuple[str, ...], force: bool, no_pull: bool,
                      mirror: str | None, node_versions: tuple[str, ...], node_prefixes: tuple[Path, ...]) -> None:
    """Build base images locally (a registry's python:X.Y-slim, Debian packages, or a local CPython
    copied into a Debian root filesystem); on a backend whose base image another backend here has,
    import that one."""
    from repo2env.errors import BackendUnavailableError
    from repo2env.runtime.backends import BACKENDS, open_backend
    from repo2env.runtime.bootstrap import DEFAULT_MIRROR, ensure_base_image, python_of
    from repo2env.runtime.node_bootstrap import ensure_node_base_image, node_source

    backend = open_selected_backend()
    others = []
    for name in BACKENDS:
        if name != backend.name:
            try:
                others.append(open_backend(name))
            except BackendUnavailableError:
                pass  # not on this machine: nothing to import from it
    wanted: list[tuple[str, str | None]] = [(python_of(path), path) for path in python_from]
    wanted += [(version, None) for version in python_versions if version not in {python for python, _ in wanted}]
    for python_version, source in wanted or [("3.11", None)]:
        image = ensure_base_image(
            backend, python_version, mirror=mirror or DEFAULT_MIRROR, try_pull=not no_pull and source is None,
            force=force, python_from=source, progress=lambda message: console.print(f"[dim]{message}[/]"),
            others=tuple(others),
        )
        console.print(f"[green]{image.tag}[/] ready ({image.origin}, {image.image_id[7:19]})")
    for node in node_versions:
        node_image = ensure_node_base_image(backend, node, local=node_source(node, node_prefixes),
                                            mirror=mirror or DEFAULT_MIRROR, force=force,
                                            progress=lambda message: console.print(f"[dim]{message}[/]"))
        console.print(f"[green]{node_image.tag}[/] ready ({node_image.origin}, {node_image.image_id[7:19]})")


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--task", "instance_id", required=True, help="Task id (owner__name-PR).")
@from_option
@click.option("--timeout", type=SECONDS, default=defaults.RUN_TIMEOUT_S, show_default=True,
              help="Seconds before the command is killed.")
@click.argument("command", nargs=-1, required=True)
def run(instance_id: str, from_dirs: tuple[Path, ...], timeout: float, command: tuple[str, ...]) -> None:
    """Run COMMAND in the task's sandbox as the agent would; print its output and the resulting diff.

    Example: repo2env run --task repo2env-demo__textkit-2 -- python -m pytest -q
    """
    from repo2env.pipeline import compose

    result, patch = compose.run_in_sandbox(instance_id, compose.task_folders(from_dirs),
                                           " ".join(command) if len(command) == 1 else shlex.join(command),
                                           timeout_s=timeout)
    stdout.out(result.output, end="", highlight=False)
    console.print(f"[dim]exit {result.exit_code}{' (timed out)' if result.timed_out else ''}"
                  f"{' (output truncated)' if result.truncated else ''} in {result.duration_s:.2f} s[/]")
    console.rule("diff against the snapshot")
    # The diff's bytes that are not UTF-8 (surrogate escapes) are shown as U+FFFD, not a crash.
    shown = patch.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    stdout.out(shown or "(no change)\n", end="", highlight=False)
    sys.exit(result.exit_code)


@cli.group(cls=Group)
def images() -> None:
    """repo2env's images on the selected backend: list them, remove the unused ones."""


@images.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def images_ls(as_json: bool) -> None:
    """List base, env and task images with their sizes."""
    from repo2env.runtime.images import ImageStore

    rows = ImageStore(open_selected_backend()).list()
    if as_json:
        stdout.print_json(json.dumps(rows))
        return
    table = Table(title="repo2env images")
    for column in ("kind", "tag", "task", "MB"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["kind"] or "", ", ".join(row["tags"]) or row["id"], row["instance_id"], str(row["size_mb"]))
    stdout.print(table)


@images.command("gc")
@from_option
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option("--all", "remove_all", is_flag=True, help="Remove every env and task image, used or not.")
def images_gc(from_dirs: tuple[Path, ...], dry_run: bool, remove_all: bool) -> None:
    """Remove task images no tasks.jsonl refers to, env images no kept task uses, and build leftovers;
    first, sandboxes whose repo2env process died (kill -9) without removing them."""
    from repo2env.jsonl import iter_tasks
    from repo2env.pipeline.compose import task_folders
    from repo2env.runtime.images import ImageStore

    keep: set[str] = set()
    if not remove_all:
        try:
            folders = task_folders(from_dirs)
        except Repo2EnvError:
            folders = []
        for folder in folders:
            keep |= {task.env_spec.image for task in iter_tasks(folder / "tasks.jsonl")
                     if task.env_spec and task.env_spec.image}
    from repo2env.runtime.ownership import reap_orphans

    backend = open_selected_backend()
    verb = "would remove" if dry_run else "removed"
    for name in reap_orphans(backend, dry_run=dry_run):
        console.print(f"{verb} container {name} (its repo2env process is gone)")
    removed = ImageStore(backend).gc(keep_tags=keep, dry_run=dry_run)
    for name in removed:
        console.print(f"{verb} {name}")
    console.print(f"{verb} {len(removed)} images; kept {len(keep)} task images in use")

