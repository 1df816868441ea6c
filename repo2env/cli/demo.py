"""``repo2env demo``: the embedded demo repository."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table

from repo2env import defaults
from repo2env.cli.root import Group, cli, console, open_selected_backend


@cli.group(cls=Group)
def demo() -> None:
    """The embedded demo repository (a small library with a history of merged PRs)."""


@demo.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--language", type=click.Choice(["python", "javascript"]), default="python", show_default=True,
              help="Which demo: python is textkit, javascript is fmtkit (JavaScript/TypeScript, mocha).")
def demo_init(directory: Path, language: str) -> None:
    """Build the demo repository in DIRECTORY/repo, with DIRECTORY/issues.json beside it."""
    from repo2env.demo import build_demo

    built = build_demo(directory, language)
    merged = sum(1 for pull in built.pulls if pull.merge_style != "unmerged")
    console.print(f"[green]demo repository[/] {built.repo} at {built.path} ({merged} merged PRs)")
    console.print(f"issues and PRs in GitHub's JSON shape: {built.issues_path}")


@demo.command("run")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the demo repository and every stage's output go [default: generated/demo for python, "
                   "generated/demo-javascript for javascript].")
@click.option("--language", type=click.Choice(["python", "javascript"]), default="python", show_default=True,
              help="Which demo: python is textkit, javascript is fmtkit.")
def demo_run(out_dir: Path | None, language: str) -> None:
    """Run every pipeline stage that exists on a demo repository (what `make demo` does)."""
    from repo2env.pipeline.demo import run_demo

    out_dir = out_dir or (defaults.DEMO_OUTPUT if language == "python" else defaults.GENERATED / f"demo-{language}")
    report = run_demo(out_dir, backend=open_selected_backend(), language=language,
                      progress=lambda message: console.print(f"[dim]{message}[/]"))
    table = Table(title=f"repo2env demo -> {out_dir}")
    for column in ("stage", "status", "result"):
        table.add_column(column)
    colours = {"done": "green", "not built yet": "yellow", "failed": "red"}
    for stage in report.stages:
        table.add_row(stage.name, f"[{colours.get(stage.status, 'white')}]{stage.status}[/]", stage.summary)
    console.print(table)
    if any(stage.status == "failed" for stage in report.stages):
        sys.exit(1)

