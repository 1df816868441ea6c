"""The ``repo2env`` command line: parse, call the library, print. Nothing else lives here."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shlex
import signal
import sys
from datetime import datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from repo2env import __version__
from repo2env.errors import InputError, Repo2EnvError

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


class _Bar:
    """One line of :func:`_progress`: a stage's bar (or spinner, without a total) with its last event."""

    def __init__(self, progress, task_id) -> None:
        self._progress, self._id = progress, task_id

    def advance(self, last: str = "", *, by: int = 1) -> None:
        self._progress.update(self._id, advance=by, last=last)
        self._show_count()

    def set(self, last: str) -> None:
        self._progress.update(self._id, last=last)

    def set_total(self, total: int) -> None:
        self._progress.update(self._id, total=total)
        self._show_count()

    def finish(self) -> None:
        total = self._task().total
        if total is not None:
            self._progress.update(self._id, completed=total)
            self._show_count()

    def _task(self):
        return next(task for task in self._progress.tasks if task.id == self._id)

    def _show_count(self) -> None:
        task = self._task()
        self._progress.update(self._id, count=f"{task.completed:.0f}/{task.total:.0f}" if task.total is not None else "")


class _Bars:
    def __init__(self, progress) -> None:
        self._progress = progress

    def print(self, message: str) -> None:
        """A line above the bars (they stay at the bottom)."""
        self._progress.console.print(message, highlight=False)

    def bar(self, stage: str, description: str, *, total: int | None = None) -> _Bar:
        count = f"0/{total}" if total is not None else ""
        return _Bar(self._progress, self._progress.add_task(description, stage=stage, total=total, last="", count=count))


@contextlib.contextmanager
def _progress(*, off_terminal: bool = True):
    """The one progress display of the CLI (rich, on stderr): a bar per stage or folder, with its
    count and its last event (``off_terminal=False``: none when stderr is not a terminal)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("[bold]{task.fields[stage]}[/] {task.description}"), BarColumn(bar_width=None),
               TextColumn("{task.fields[count]}"), TextColumn("{task.fields[last]}", markup=False), TimeElapsedColumn())
    with Progress(*columns, console=console, disable=not (off_terminal or console.is_terminal)) as progress:
        yield _Bars(progress)


class _Group(click.Group):
    """Lists commands in the pipeline's order, then in the order they were added."""

    order = ("mine", "build", "run", "grade", "validate", "publish", "pull", "train", "serve", "import", "export",
             "pipeline", "demo", "doctor",
             "runtime", "images")

    def list_commands(self, ctx: click.Context) -> list[str]:
        ranked = {name: index for index, name in enumerate(self.order)}
        return sorted(self.commands, key=lambda name: (ranked.get(name, len(ranked)), list(self.commands).index(name)))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="repo2env")
def cli() -> None:
    """Turn a repository's merged pull requests into RL environments for coding agents.

    \b
    Pipeline:  mine -> build -> validate -> publish -> train
    Start with: repo2env doctor   (is Docker ready?)
                repo2env demo run (every built stage on the embedded demo repository)
    """


# --- demo --------------------------------------------------------------------------------------


@cli.group(cls=_Group)
def demo() -> None:
    """The embedded demo repository (a small library with a history of merged PRs)."""


@demo.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def demo_init(directory: Path) -> None:
    """Build the demo repository in DIRECTORY/repo, with DIRECTORY/issues.json beside it."""
    from repo2env.demo import build_demo

    built = build_demo(directory)
    merged = sum(1 for pull in built.pulls if pull.merge_style != "unmerged")
    console.print(f"[green]demo repository[/] {built.repo} at {built.path} ({merged} merged PRs)")
    console.print(f"issues and PRs in GitHub's JSON shape: {built.issues_path}")


@demo.command("run")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("generated/demo"),
              show_default=True, help="Where the demo repository and every stage's output go.")
def demo_run(out_dir: Path) -> None:
    """Run every pipeline stage that exists on the demo repository (what `make demo` does)."""
    from repo2env.pipeline.demo import run_demo

    report = run_demo(out_dir, progress=lambda message: console.print(f"[dim]{message}[/]"))
    table = Table(title=f"repo2env demo -> {out_dir}")
    for column in ("stage", "status", "result"):
        table.add_column(column)
    colours = {"done": "green", "not built yet": "yellow", "failed": "red"}
    for stage in report.stages:
        table.add_row(stage.name, f"[{colours.get(stage.status, 'white')}]{stage.status}[/]", stage.summary)
    console.print(table)
    if any(stage.status == "failed" for stage in report.stages):
        sys.exit(1)


# --- mine --------------------------------------------------------------------------------------


@cli.command()
@click.option("--repo", "repo_spec", required=True, metavar="OWNER/NAME|PATH|URL",
              help="GitHub repository (API), or a local clone / git URL (local history, offline).")
@click.option("--issues", "issues_path", type=click.Path(dir_okay=False, path_type=Path),
              help="issues.json in GitHub's REST shape, for local history (the demo ships one).")
@click.option("--name", "repo_name", metavar="OWNER/NAME",
              help="Name for a local clone's tasks [default: issues.json's repository, the origin URL, or local/<dir>].")
@click.option("--allow-no-issue", is_flag=True,
              help="Keep PRs without a linked issue: the PR's title and body are the task (none: empty_problem_statement).")
@click.option("--branch", metavar="NAME",
              help="Local history: the branch whose history is mined [default: HEAD, main or master]. PRs merged "
                   "only into another branch are not_merged with a hint to mine that branch.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder [default: generated/<owner>__<name>].")
@click.option("--token", envvar="GITHUB_TOKEN", help="GitHub token [env: GITHUB_TOKEN].")
@click.option("--api-url", default=None, help="GitHub API base URL (GitHub Enterprise: https://HOST/api/v3).")
@click.option("--since", type=click.DateTime(), help="Only PRs merged on or after this date.")
@click.option("--until", type=click.DateTime(), help="Only PRs merged on or before this date.")
@click.option("--pr", "pull_numbers", type=int, multiple=True, help="Only this PR (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), help="Stop after this many new tasks.")
@click.option("--max-files", type=click.IntRange(min=1), default=50, show_default=True,
              help="Reject PRs changing more source+test files.")
@click.option("--max-lines", type=click.IntRange(min=1), default=3000, show_default=True,
              help="Reject PRs whose fix (source part) changes more lines.")
@click.option("--json", "as_json", is_flag=True, help="Print the funnel as JSON on stdout.")
def mine(repo_spec: str, repo_name: str | None, issues_path: Path | None, allow_no_issue: bool, branch: str | None,
         out_dir: Path | None, token: str | None, api_url: str | None, since, until, pull_numbers: tuple[int, ...],
         limit: int | None, max_files: int, max_lines: int, as_json: bool) -> None:
    """Mine merged PRs that fix an issue and change tests into task candidates.

    Writes OUT/tasks.jsonl (one task per line; re-runs skip ids already there) and OUT/funnel.json
    (how many PRs reached each step; every rejection with its reason; earlier runs and totals kept).
    """
    from repo2env.mine.miner import MineOptions, default_out_dir
    from repo2env.mine.miner import mine as run_mine
    from repo2env.mine.open import open_source

    source = open_source(repo_spec, issues_path=issues_path, token=token, api_url=api_url, name=repo_name,
                         on_wait=lambda message: console.print(f"[yellow]{message}[/]"), branch=branch)
    out_dir = out_dir or default_out_dir(Path("generated"), source.repo)
    local_zone = datetime.now().astimezone().tzinfo
    options = MineOptions(
        allow_no_issue=allow_no_issue,
        since=since.replace(tzinfo=since.tzinfo or local_zone) if since else None,
        until=until.replace(tzinfo=until.tzinfo or local_zone) if until else None,
        pull_numbers=frozenset(pull_numbers), limit=limit, max_files=max_files, max_changed_lines=max_lines,
    )
    with _progress(off_terminal=False) as bars:
        bar = bars.bar("mine", source.repo)
        result = run_mine(source, out_dir, options,
                          progress=lambda scanned, kept: bar.set(f"{scanned} PRs scanned, {kept} kept"))
    if result.torn_bytes:
        click.echo(f"warning: cut a torn last line ({result.torn_bytes} bytes) off {result.tasks_path}: an earlier "
                   "run was stopped while writing it; the rows before it are kept", err=True)
    funnel = result.funnel
    if as_json:
        stdout.print_json(funnel.model_dump_json())
    table = Table(title=f"funnel: {source.repo}")
    table.add_column("step")
    table.add_column("PRs", justify="right")
    for step, count in funnel.counts.items():
        if not step.startswith("rejected:"):
            table.add_row(step, str(count))
    for reason, count in sorted(funnel.reasons().items()):
        table.add_row(f"[red]rejected: {reason}[/]", str(count))
    console.print(table)
    console.print(f"{len(result.new_tasks)} new tasks -> {result.tasks_path}; funnel -> {result.funnel_path}")
    if funnel.previous_runs:
        rejected = sum(count for step, count in funnel.totals.items() if step.startswith("rejected:"))
        console.print(f"over {funnel.totals.get('runs', 0)} runs: {funnel.totals.get('kept', 0)} tasks, "
                      f"{rejected} PRs rejected (funnel.json: totals, previous_runs)")


# --- machine -----------------------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(as_json: bool) -> None:
    """Check the Docker engine, the base images and what builds will be given (CA bundle, index);
    remove sandboxes whose repo2env process died without removing them."""
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


@cli.group(cls=_Group)
def runtime() -> None:
    """The container runtime: base images."""


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
def runtime_bootstrap(python_versions: tuple[str, ...], python_from: tuple[str, ...], force: bool, no_pull: bool,
                      mirror: str | None) -> None:
    """Build base images locally (a registry's python:X.Y-slim, Debian packages, or a local CPython
    copied into a Debian root filesystem)."""
    from repo2env.runtime.backends.docker import connect_docker
    from repo2env.runtime.bootstrap import DEFAULT_MIRROR, ensure_base_image, python_of

    client = connect_docker()
    wanted: list[tuple[str, str | None]] = [(python_of(path), path) for path in python_from]
    wanted += [(version, None) for version in python_versions if version not in {python for python, _ in wanted}]
    for python_version, source in wanted or [("3.11", None)]:
        image = ensure_base_image(
            client, python_version, mirror=mirror or DEFAULT_MIRROR, try_pull=not no_pull and source is None,
            force=force, python_from=source, progress=lambda message: console.print(f"[dim]{message}[/]"),
        )
        console.print(f"[green]{image.tag}[/] ready ({image.origin}, {image.image_id[7:19]})")


# --- task folders ------------------------------------------------------------------------------


def _tasks_dirs(from_dirs: tuple[Path, ...]) -> list[Path]:
    from repo2env.runtime.build import tasks_dirs

    return tasks_dirs(Path("generated"), list(from_dirs))


_from_option = click.option("--from", "from_dirs", type=click.Path(file_okay=False, path_type=Path), multiple=True,
                            help="Task folder(s) with a tasks.jsonl [default: every one under generated/].")


@cli.command()
@_from_option
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=2, show_default=True, help="Builds in parallel.")
@click.option("--task", "instance_ids", multiple=True, help="Only this task id (repeatable).")
@click.option("--overrides", type=click.Path(dir_okay=False, path_type=Path),
              help="YAML of per-repo environment overrides ({repos: {owner/name: {python: '3.9', ...}}}).")
@click.option("--no-collect-check", is_flag=True, help="Skip the pytest collection check of each built image.")
def build(from_dirs: tuple[Path, ...], jobs: int, instance_ids: tuple[str, ...], overrides: Path | None,
          no_collect_check: bool) -> None:
    """Build a runtime image per task: env image (dependencies, shared) + task image (the snapshot).

    Marks each task env_ok or env_failed (with the reason and the build log) in its tasks.jsonl;
    one failure never stops the batch, and re-runs reuse every cached image. An install whose
    project code does not import from /testbed (e.g. a released package installed over the
    editable checkout) fails, and the images of failed attempts are removed. Ctrl-C or SIGTERM
    stops at once: queued tasks are cancelled, running containers removed, finished tasks kept.
    """
    from repo2env.jsonl import read_task_ids
    from repo2env.pipeline.stages import build_tasks_dir
    from repo2env.runtime.backends.docker import DockerRuntime
    from repo2env.runtime.build import BuildOptions
    from repo2env.runtime.spec.overrides import load_overrides

    options = BuildOptions(jobs=jobs, overrides=load_overrides(overrides) if overrides else {},
                           instance_ids=frozenset(instance_ids), collect_check=not no_collect_check)
    runtime = DockerRuntime()
    failed_total = 0
    for folder in _tasks_dirs(from_dirs):
        total = len(read_task_ids(folder / "tasks.jsonl") & set(instance_ids)) if instance_ids else \
            len(read_task_ids(folder / "tasks.jsonl"))
        with _progress() as bars:
            bar = bars.bar("build", folder.name, total=total)
            summary = build_tasks_dir(folder, runtime=runtime, options=options,
                                      progress=lambda task, spec, bar=bar: bar.advance(f"{task.instance_id}: {spec.status}"))
        failed_total += summary.failed
        console.print(f"{folder}: [green]{summary.ok} env_ok[/] ({summary.reused} reused), "
                      f"[red]{summary.failed} env_failed[/]; {len(summary.env_images)} env images for {summary.ok} tasks")
        for instance_id, reason in sorted(summary.failures.items()):
            console.print(f"  [red]{instance_id}[/]: {reason}", highlight=False)
    sys.exit(1 if failed_total else 0)


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--task", "instance_id", required=True, help="Task id (owner__name-PR).")
@_from_option
@click.option("--timeout", type=SECONDS, default=600, show_default=True, help="Seconds before the command is killed.")
@click.argument("command", nargs=-1, required=True)
def run(instance_id: str, from_dirs: tuple[Path, ...], timeout: float, command: tuple[str, ...]) -> None:
    """Run COMMAND in the task's sandbox as the agent would; print its output and the resulting diff.

    Example: repo2env run --task repo2env-demo__textkit-2 -- python -m pytest -q
    """
    from repo2env.jsonl import find_task
    from repo2env.runtime.backends.docker import DockerRuntime

    task, _ = find_task([folder / "tasks.jsonl" for folder in _tasks_dirs(from_dirs)], instance_id)
    with DockerRuntime().start(task) as sandbox:
        result = sandbox.exec(" ".join(command) if len(command) == 1 else shlex.join(command), timeout=timeout)
        stdout.out(result.output, end="", highlight=False)
        patch = sandbox.diff()
    console.print(f"[dim]exit {result.exit_code}{' (timed out)' if result.timed_out else ''}"
                  f"{' (output truncated)' if result.truncated else ''} in {result.duration_s:.2f} s[/]")
    console.rule("diff against the snapshot")
    # The diff's bytes that are not UTF-8 (surrogate escapes) are shown as U+FFFD, not a crash.
    shown = patch.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    stdout.out(shown or "(no change)\n", end="", highlight=False)
    sys.exit(result.exit_code)


@cli.group(cls=_Group)
def images() -> None:
    """repo2env's Docker images: list them, remove the unused ones."""


@images.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def images_ls(as_json: bool) -> None:
    """List base, env and task images with their sizes."""
    from repo2env.runtime.backends.docker import connect_docker
    from repo2env.runtime.images import ImageStore

    rows = ImageStore(connect_docker()).list()
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
@_from_option
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option("--all", "remove_all", is_flag=True, help="Remove every env and task image, used or not.")
def images_gc(from_dirs: tuple[Path, ...], dry_run: bool, remove_all: bool) -> None:
    """Remove task images no tasks.jsonl refers to, env images no kept task uses, and build leftovers;
    first, sandboxes whose repo2env process died (kill -9) without removing them."""
    from repo2env.jsonl import iter_tasks
    from repo2env.runtime.backends.docker import connect_docker
    from repo2env.runtime.images import ImageStore

    keep: set[str] = set()
    if not remove_all:
        try:
            folders = _tasks_dirs(from_dirs)
        except Repo2EnvError:
            folders = []
        for folder in folders:
            keep |= {task.env_spec.image for task in iter_tasks(folder / "tasks.jsonl")
                     if task.env_spec and task.env_spec.image}
    from repo2env.runtime.ownership import reap_orphans

    client = connect_docker()
    verb = "would remove" if dry_run else "removed"
    for name in reap_orphans(client, dry_run=dry_run):
        console.print(f"{verb} container {name} (its repo2env process is gone)")
    removed = ImageStore(client).gc(keep_tags=keep, dry_run=dry_run)
    for name in removed:
        console.print(f"{verb} {name}")
    console.print(f"{verb} {len(removed)} images; kept {len(keep)} task images in use")


@cli.command()
@click.option("--task", "instance_id", help="Task id (owner__name-PR); with --patch.")
@click.option("--patch", "patch_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The agent's diff against the task's snapshot ('-' for stdin).")
@click.option("--predictions", type=click.Path(dir_okay=False, path_type=Path),
              help="SWE-bench predictions (JSONL of instance_id, model_name_or_path, model_patch).")
@_from_option
@click.option("--mode", type=click.Choice(["graded", "binary", "f2p"]), default="graded", show_default=True,
              help="graded = f2p_rate x p2p_rate; binary = resolved; f2p = f2p_rate.")
@click.option("--timeout", type=SECONDS, default=900, show_default=True, help="Seconds for the hidden tests.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every GradeResult as JSONL here [default: grades.jsonl in the task folder].")
@click.option("--json", "as_json", is_flag=True, help="Print the result(s) as JSON on stdout.")
def grade(instance_id: str | None, patch_path: Path | None, predictions: Path | None, from_dirs: tuple[Path, ...],
          mode: str, timeout: float, out_path: Path | None, as_json: bool) -> None:
    """Grade a patch (or SWE-bench predictions) with the hidden verifier: the PR's tests, run in a
    fresh sandbox the agent never saw, after dropping the patch's changes to tests and test config."""
    from repo2env.jsonl import append_jsonl, find_task
    from repo2env.runtime.backends.docker import DockerRuntime
    from repo2env.verify.grader import Grader, load_predictions

    if bool(predictions) == bool(instance_id or patch_path):
        raise InputError("give either --task with --patch, or --predictions")
    if instance_id and not patch_path:
        raise InputError("--task needs --patch FILE (use '-' for stdin)")
    if predictions:
        jobs = [(row["instance_id"], row.get("model_patch") or "") for row in load_predictions(predictions)]
    else:
        if str(patch_path) != "-" and not patch_path.is_file():
            raise InputError(f"no patch file at {patch_path}")
        # A patch is bytes (a Latin-1 file, a binary hunk): carried as surrogate escapes, written back as read.
        raw = sys.stdin.buffer.read() if str(patch_path) == "-" else patch_path.read_bytes()
        jobs = [(instance_id, raw.decode("utf-8", errors="surrogateescape"))]
    tasks_files = [folder / "tasks.jsonl" for folder in _tasks_dirs(from_dirs)]
    if out_path:
        # A folder that cannot take the results fails now, not after the gradings it would lose.
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.open("a").close()
    runtime = DockerRuntime()
    results = []
    for job_id, patch in jobs:
        task, tasks_path = find_task(tasks_files, job_id)
        grader = Grader(runtime, tasks_path.parent / "logs" / "grades", timeout_s=timeout)
        result = grader.grade(task, patch, mode=mode)
        results.append(result)
        append_jsonl(out_path or tasks_path.parent / "grades.jsonl", [result])
        flag = "[green]resolved[/]" if result.resolved else ("[red]error[/]" if result.error else "")
        console.print(f"{job_id}: reward {result.reward:.3f} (f2p {result.f2p_rate:.2f}, p2p {result.p2p_rate:.2f}) "
                      f"{flag} {result.error or ''}", highlight=False)
        if result.filtered_paths:
            console.print(f"  dropped from the patch (tests / test config): {', '.join(result.filtered_paths)}",
                          highlight=False)
        console.print(f"  logs: {result.log_dir}", highlight=False)
    if as_json:
        payload = [result.model_dump(mode="json") for result in results]
        stdout.print_json(json.dumps(payload[0] if len(payload) == 1 and not predictions else payload))


@cli.command()
@click.argument("roots", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@_from_option
@click.option("--policy-file", default="default", show_default=True,
              help="Acceptance policy: a name in validators/ (default, strict) or a YAML path.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Tasks in parallel.")
@click.option("--task", "instance_ids", multiple=True, help="Only this task id (repeatable).")
@click.option("--force", is_flag=True, help="Validate again tasks that already have a record.")
@click.option("--policy", "policy_url", metavar="URL",
              help="OpenAI-compatible endpoint (…/v1) for policy rollouts: vLLM, TGI or a hosted API.")
@click.option("--model", help="Model name for --policy.")
@click.option("-k", "policy_k", type=click.IntRange(min=0), default=0, help="Policy rollouts per task (with --policy).")
@click.option("--whole-suite", is_flag=True, help="Derive PASS_TO_PASS from the whole test suite.")
def validate(roots: tuple[Path, ...], from_dirs: tuple[Path, ...], policy_file: str, jobs: int,
             instance_ids: tuple[str, ...], force: bool, policy_url: str | None, model: str | None, policy_k: int,
             whole_suite: bool) -> None:
    """Keep only environments whose rewards are right, stable and varied.

    Per task: derive FAIL_TO_PASS / PASS_TO_PASS (each test run several times, shuffled, flaky ones
    excluded), grade the gold patch, the empty patch, partial fixes, near misses and stubs (and K policy
    rollouts with --policy), and judge with the acceptance policy. Writes validation.jsonl,
    summary.md and validation.png next to each tasks.jsonl. ROOTS are searched for tasks.jsonl
    (default: generated/). Re-runs resume. Ctrl-C or SIGTERM stops at once: queued tasks are
    cancelled, running sandboxes removed, finished records kept.
    """
    from repo2env.jsonl import read_task_ids
    from repo2env.pipeline.stages import validate_dir
    from repo2env.runtime.backends.docker import DockerRuntime
    from repo2env.runtime.build import tasks_dirs
    from repo2env.validate.acceptance import load_acceptance_policy

    policy = load_acceptance_policy(policy_file)
    if whole_suite:
        policy = policy.model_copy(update={"whole_suite_p2p": True})
    if bool(policy_url) != bool(model):
        raise InputError("--policy and --model go together")
    runner = None
    if policy_url:
        from repo2env.validate.policy import PolicyClient

        client = PolicyClient(policy_url, model)
        runner = client.rollouts
    folders = list(from_dirs)
    for root in roots:
        folders += tasks_dirs(root, [])
    folders = folders or tasks_dirs(Path("generated"), [])
    runtime = DockerRuntime()
    for folder in dict.fromkeys(folders):
        total = len(read_task_ids(folder / "tasks.jsonl"))
        with _progress() as bars:
            bar = bars.bar("validate", str(folder), total=total)
            summary = validate_dir(
                folder, runtime, policy, jobs=jobs, policy_runner=runner, policy_k=policy_k, force=force,
                instance_ids=frozenset(instance_ids),
                progress=lambda record, bar=bar: bar.advance(
                    f"{record.instance_id}: {record.verdict} {' '.join(record.reasons)}"),
            )
            bar.finish()
        console.print(f"{folder}: {summary.accepted}/{len(summary.records)} accepted this run "
                      f"({summary.skipped} already validated); summary: {folder / 'summary.md'}; "
                      f"figure: {folder / 'validation.png'}")


@cli.command()
@_from_option
@click.option("--to", "target", required=True, metavar="hf://ORG/NAME|DIR",
              help="A Hugging Face Hub dataset repository (hf://org/name) or a local folder.")
@click.option("--name", help="The dataset's pretty name in its card [default: the Hub repo id or the folder name].")
@click.option("--split-by-date", type=click.DateTime(formats=["%Y-%m-%d"]), metavar="YYYY-MM-DD",
              help="Tasks created before this day go to 'train', the others to 'test'.")
@click.option("--include-rejected", is_flag=True, help="Publish rejected and never-validated tasks too.")
@click.option("--json-lists", is_flag=True, help="FAIL_TO_PASS / PASS_TO_PASS as JSON strings (SWE-bench's style).")
@click.option("--license", "license_id", default="other", show_default=True, help="License id for the card.")
@click.option("--overwrite", is_flag=True, help="Replace a target that already has content.")
@click.option("--save-images", is_flag=True,
              help="Put every task's image in the dataset (images/images.tar, layers shared) for 'repo2env pull'.")
@click.option("--push-images", "push_registry", metavar="REGISTRY",
              help="Push every task's image to REGISTRY (host[:port][/path]) first; the rows and Harbor tasks "
                   "record REGISTRY/NAME@sha256:DIGEST, which 'repo2env pull' pulls.")
@click.option("--private", is_flag=True, help="Hub: create the repository private.")
@click.option("--revision", help="Hub: the branch to commit to (created when missing).")
@click.option("--create-pr", is_flag=True, help="Hub: open a pull request instead of committing to the branch.")
@click.option("--token", help="Hub token [default: HF_TOKEN, else the stored 'hf auth login'].")
@click.option("--hub-url", help="Hub endpoint [default: HF_ENDPOINT, else the public Hub].")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def publish(from_dirs: tuple[Path, ...], target: str, name: str | None, split_by_date: datetime | None,
            include_rejected: bool, json_lists: bool, license_id: str, overwrite: bool, save_images: bool,
            push_registry: str | None, private: bool,
            revision: str | None, create_pr: bool, token: str | None, hub_url: str | None, as_json: bool) -> None:
    """Publish validated environments as a dataset: parquet rows (a TRL-ready `prompt` column, the
    SWE-bench fields, the environment, the validation figures), Harbor task folders (tasks/), a
    dataset card and a manifest.

    Only accepted tasks are published; tasks never validated are refused unless --include-rejected.
    A folder target is complete or absent after an interruption.
    """
    from repo2env.publish.dataset import PublishOptions, publish_to_folder
    from repo2env.publish.harbor import harbor_writer
    from repo2env.publish.hub import HubTarget, parse_target, publish_to_hub
    from repo2env.publish.images import save_images as image_writer

    destination = parse_target(target)
    folders = _tasks_dirs(from_dirs)
    default_name = destination.repo_id if isinstance(destination, HubTarget) else Path(destination).name
    writers = [harbor_writer(name or default_name), *([image_writer] if save_images else [])]
    options = PublishOptions(name=name or default_name, split_by_date=split_by_date.date() if split_by_date else None,
                             include_rejected=include_rejected, json_lists=json_lists, license_id=license_id,
                             push_registry=push_registry)
    with console.status("pushing the images and writing the dataset" if push_registry else "writing the dataset"):
        if isinstance(destination, HubTarget):
            summary = publish_to_hub(folders, destination.repo_id, options, token=token, endpoint=hub_url,
                                     private=private, revision=revision, create_pr=create_pr, overwrite=overwrite,
                                     extra_writers=writers)
        else:
            summary = publish_to_folder(folders, destination, options, overwrite=overwrite, extra_writers=writers)
    if as_json:
        stdout.print_json(json.dumps({"target": summary.target, "splits": summary.splits, "rows": summary.rows,
                                      "left_out": dict(summary.left_out), "files": summary.files,
                                      "harbor_tasks": summary.harbor_tasks}))
        return
    splits = ", ".join(f"{split} {count}" for split, count in summary.splits.items())
    left = ", ".join(f"{reason} {count}" for reason, count in sorted(summary.left_out.items()))
    console.print(f"published {summary.rows} environments ({splits}) to {summary.target}; "
                  f"{summary.files} files with checksums in manifest.json"
                  f"{'; left out: ' + left if left else ''}", highlight=False)


@cli.command()
@click.argument("source", metavar="hf://ORG/NAME|DIR")
@click.option("--out", "out_root", type=click.Path(file_okay=False, path_type=Path), default=Path("generated"),
              show_default=True, help="Root of the task folders (one per repository: OUT/owner__name/).")
@click.option("--clone", "clones", multiple=True, metavar="OWNER/NAME=PATH",
              help="A local clone of a repository, to rebuild images the dataset does not carry; repeatable.")
@click.option("--no-build", is_flag=True, help="Only write the task folders; build nothing.")
@click.option("--revision", help="Hub: the branch or commit to download.")
@click.option("--token", help="Hub token [default: HF_TOKEN, else the stored login] (private datasets).")
@click.option("--hub-url", help="Hub endpoint [default: HF_ENDPOINT, else the public Hub].")
def pull(source: str, out_root: Path, clones: tuple[str, ...], no_build: bool, revision: str | None,
         token: str | None, hub_url: str | None) -> None:
    """Bring a published dataset here and make its environments runnable.

    The files are checked against the dataset's manifest, rows become task folders, and each task's
    image is found here, loaded from the dataset's images/images.tar, pulled from the registry
    'publish --push-images' pushed it to, or rebuilt from --clone.
    """
    from repo2env.pipeline.stages import folder_builder
    from repo2env.publish.hub import HubTarget, download_from_hub, parse_target
    from repo2env.publish.pull import pull_dataset
    from repo2env.runtime.backends.docker import DockerRuntime

    origin = parse_target(source)
    if isinstance(origin, HubTarget):
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
        destination = out_root / "datasets" / origin.repo_id.replace("/", "__")
        with console.status(f"downloading {origin.repo_id}"):
            origin = download_from_hub(origin.repo_id, destination, token=token, endpoint=hub_url, revision=revision)
    runtime = None if no_build else DockerRuntime()
    summary = pull_dataset(origin, out_root, runtime=runtime, clones=_clone_mapping(clones), build=not no_build,
                           builder=folder_builder(runtime) if runtime else None)
    for repo, folder in summary.folders.items():
        console.print(f"{repo}: {folder / 'tasks.jsonl'}", highlight=False)
    console.print(f"{summary.tasks} tasks; runnable here: {summary.runnable} ({summary.loaded_images} images loaded, "
                  f"{summary.pulled} pulled, {summary.rebuilt} rebuilt)", highlight=False)
    for instance_id, why in summary.not_runnable.items():
        console.print(f"[yellow]not runnable[/] {instance_id}: {why}", highlight=False)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--dataset", "source", metavar="DIR|hf://ORG/NAME", help="A dataset 'repo2env publish' wrote.")
@click.option("--model", "model_path", metavar="PATH|ID", help="A causal LM with a tool-calling chat template.")
@click.option("--output", "output_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The run's folder: checkpoints, metrics.jsonl, reward.png.")
@click.option("--eval-steps", type=int, default=10, show_default=True,
              help="Evaluate on the held-out 'test' split every N steps (logged as eval_reward).")
@click.option("--clone", "clones", multiple=True, metavar="OWNER/NAME=PATH",
              help="A local clone, to rebuild images the dataset does not carry; repeatable.")
@click.option("--demo", is_flag=True, help="The whole loop on the embedded demo with a tiny local model "
              "(what 'make train-demo' does); --output defaults to generated/train-demo.")
@click.pass_context
def train(ctx: click.Context, source: str | None, model_path: str | None, output_dir: Path | None, eval_steps: int,
          clones: tuple[str, ...], demo: bool) -> None:
    """GRPO with TRL on a published dataset, RepoEnv as the environment.

    Loads the dataset, makes every task's image exist here, trains on 'train' and evaluates on
    'test'. Any other option is a GRPOConfig field, e.g. --max_steps 100 --num_generations 8
    --learning_rate 1e-6 --report_to wandb. Per episode it logs tool calls by tool, repeated
    calls, tampering, timeouts and the diff size (episode/* metrics). Needs the train extra.
    """
    from repo2env.train.run import require_train_extra

    require_train_extra()
    if demo:
        from repo2env.train.demo import run_train_demo

        result = run_train_demo(output_dir or Path("generated/train-demo"),
                                progress=lambda message: console.print(f"[dim]{message}[/]"))
        console.print(f"dataset {result.dataset} ({', '.join(f'{k} {v}' for k, v in result.splits.items())}); "
                      f"tiny model {result.model} (teaching loss {result.teach_loss[0]:.2f} -> {result.teach_loss[1]:.3f})",
                      highlight=False)
        console.print(f"reward per step: {', '.join(f'{r:.2f}' for r in result.rewards)}; eval reward: "
                      f"{', '.join(f'{r:.2f}' for r in result.eval_rewards) or 'none'}", highlight=False)
        console.print(f"figure: {result.figure}; metrics: {result.run / 'metrics.jsonl'}", highlight=False)
        return
    if not (source and model_path and output_dir):
        raise InputError("train needs --dataset, --model and --output (or --demo)")
    from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser
    from trl import GRPOConfig

    from repo2env.train.run import grpo_trainer, prepare_dataset, run_training

    (args,) = HfArgumentParser(GRPOConfig).parse_args_into_dataclasses(
        ["--output_dir", str(output_dir), "--logging_steps", "1", "--eval_strategy", "steps", "--eval_steps", str(eval_steps), *ctx.args])
    with console.status("loading the dataset and its images"):
        prepared = prepare_dataset(source, output_dir / "work", clones=_clone_mapping(clones))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    trainer = grpo_trainer(model, tokenizer, args, prepared.splits["train"], prepared.splits.get("test"))
    result = run_training(trainer, output_dir)
    trainer.save_model(str(output_dir / "final"))
    console.print(f"{len(result.log_history)} log entries -> {result.metrics_path}; figure: {result.figure}; "
                  f"model: {output_dir / 'final'}", highlight=False)


def _clone_mapping(clones: tuple[str, ...]) -> dict[str, str]:
    mapping = {}
    for item in clones:
        repo, separator, location = item.partition("=")
        if not separator or "/" not in repo or not location:
            raise InputError(f"--clone {item!r}: expected OWNER/NAME=PATH")
        mapping[repo] = location
    return mapping


@cli.group("import", cls=_Group)
def import_group() -> None:
    """Bring tasks made elsewhere into repo2env (to build, validate and train on them here)."""


@import_group.command("swebench")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_root", type=click.Path(file_okay=False, path_type=Path), default=Path("generated"),
              show_default=True, help="Root of the task folders (one per repository: OUT/owner__name/).")
@click.option("--clone", "clones", multiple=True, metavar="OWNER/NAME=PATH",
              help="A local clone (full history) of a repository the rows name; repeatable. Needed by build.")
def import_swebench_command(path: Path, out_root: Path, clones: tuple[str, ...]) -> None:
    """Import SWE-bench-format rows (SWE-bench, SWE-Gym, SWE-rebench; JSON, JSONL or parquet).

    Their FAIL_TO_PASS / PASS_TO_PASS are kept as declared; 'repo2env validate' re-derives them with
    our runtime and reports the difference in validation.jsonl (declared_differences).
    """
    from repo2env.publish.swebench import import_swebench

    summary = import_swebench(path, out_root, _clone_mapping(clones))
    for repo, folder in summary.folders.items():
        console.print(f"{repo}: {summary.tasks[repo]} tasks -> {folder / 'tasks.jsonl'}", highlight=False)
    if summary.missing_clones:
        console.print(f"[yellow]no clone recorded for[/] {', '.join(summary.missing_clones)}: pass --clone "
                      "OWNER/NAME=PATH (or mine the repository) before 'repo2env build'", highlight=False)


@cli.group("export", cls=_Group)
def export_group() -> None:
    """Write validated tasks in one format of the field."""


@export_group.command("swebench")
@_from_option
@click.argument("out_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--lists", is_flag=True, help="FAIL_TO_PASS / PASS_TO_PASS as lists, not JSON strings.")
@click.option("--include-rejected", is_flag=True, help="Export tasks that were not accepted too.")
def export_swebench_command(from_dirs: tuple[Path, ...], out_path: Path, lists: bool, include_rejected: bool) -> None:
    """Write accepted tasks as SWE-bench instances (JSONL) to OUT_PATH."""
    from repo2env.publish.swebench import export_swebench

    count = export_swebench(_tasks_dirs(from_dirs), out_path, json_lists=not lists, accepted_only=not include_rejected)
    console.print(f"{count} SWE-bench instances -> {out_path}", highlight=False)


@export_group.command("harbor")
@_from_option
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", default="repo2env", show_default=True,
              help="The dataset's name; task.toml names each task OWNER/INSTANCE_ID with its first part.")
@click.option("--include-rejected", is_flag=True, help="Export built tasks that were not accepted too.")
@click.option("--overwrite", is_flag=True, help="Replace an OUT_DIR that already has content.")
def export_harbor_command(from_dirs: tuple[Path, ...], out_dir: Path, name: str, include_rejected: bool,
                          overwrite: bool) -> None:
    """Write accepted tasks as Harbor task folders to OUT_DIR/<instance_id>/: instruction.md, task.toml,
    environment/Dockerfile, tests/test.sh (the hidden verifier, writing /logs/verifier/reward.txt and
    reward.json) and solution/solve.sh (the gold patch)."""
    from repo2env.publish.harbor import export_harbor

    written = export_harbor(_tasks_dirs(from_dirs), out_dir, dataset=name, accepted_only=not include_rejected,
                            overwrite=overwrite)
    console.print(f"{written.tasks} Harbor tasks -> {written.root}; run one with: harbor run -p "
                  f"{written.root}/INSTANCE_ID", highlight=False)


@export_group.command("openenv")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--dataset", "dataset_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A folder 'repo2env publish --to DIR' wrote; it is copied into the package.")
@click.option("--name", default="repo2env", show_default=True, help="The environment's name in openenv.yaml.")
@click.option("--wheel", "wheels", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A wheel the image installs from (e.g. repo2env's own, when the index has no repo2env); repeatable.")
@click.option("--overwrite", is_flag=True, help="Replace an OUT_DIR that already has content.")
def export_openenv_command(out_dir: Path, dataset_dir: Path, name: str, wheels: tuple[Path, ...], overwrite: bool) -> None:
    """Write a deployable OpenEnv package to OUT_DIR: openenv.yaml, server/app.py, a Dockerfile that
    installs repo2env[openenv] and serves the dataset, and a README (the server needs a Docker engine)."""
    from repo2env.publish.openenv import export_openenv

    written = export_openenv(dataset_dir, out_dir, name=name, wheels=wheels, overwrite=overwrite)
    console.print(f"OpenEnv package ({written.tasks} tasks) -> {written.root}; "
                  f"build it with: docker build -t {name} {written.root}", highlight=False)


@cli.command()
@click.option("--dataset", "dataset_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A folder 'repo2env publish --to DIR' wrote.")
@click.option("--split", help="Serve only this split [default: every split].")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--max-sessions", default=8, show_default=True, type=click.IntRange(1),
              help="Concurrent WebSocket sessions (one sandbox each).")
def serve(dataset_dir: Path, split: str | None, host: str, port: int, max_sessions: int) -> None:
    """Serve a published dataset's environments over OpenEnv's protocol (HTTP /reset /step /state
    /health /schema, WebSocket /ws). Needs the 'openenv' extra and the tasks' images on this engine.

    \b
    reset:  {"task_id": ID} (or a seed, or nothing: the next task in turn)
    step:   {"tool": "bash", "arguments": {"command": "ls"}}, ... then {"tool": "submit"} -> reward, done
    """
    from repo2env.envs.catalog import TaskCatalog
    from repo2env.envs.openenv_server import serve as serve_openenv

    catalog = TaskCatalog.from_published(dataset_dir, split=split)
    console.print(f"serving {len(catalog)} tasks over OpenEnv on http://{host}:{port} (WebSocket /ws); "
                  "Ctrl-C stops and removes every sandbox", highlight=False)
    serve_openenv(catalog, host=host, port=port, max_sessions=max_sessions)


@cli.group(cls=_Group)
def pipeline() -> None:
    """Many repositories through mine -> build -> validate -> publish, from a spec; resumable."""


class _PipelineProgress:
    """A pipeline run's events as one bar per stage (done/planned, the last result) and a line per failure."""

    def __init__(self, bars: _Bars) -> None:
        self._bars = bars
        self._stage_bars: dict[str, _Bar] = {}
        self._planned: dict[str, int] = {}

    def _bar(self, stage: str) -> _Bar:
        if stage not in self._stage_bars:
            self._stage_bars[stage] = self._bars.bar(stage, "", total=0)
        return self._stage_bars[stage]

    def planned(self, stage: str, total: int) -> None:
        self._planned[stage] = self._planned.get(stage, 0) + total
        self._bar(stage).set_total(self._planned[stage])

    def started(self, stage: str, key: str) -> None:
        self._bar(stage).set(f"{key}: running")

    def skipped(self, stage: str, key: str) -> None:
        self._bar(stage).advance()

    def finished(self, stage: str, key: str, output, seconds: float) -> None:
        from repo2env.pipeline.batch import outcome_of

        self._bar(stage).advance(f"{key}: {outcome_of(output) or 'done'} ({seconds:.0f} s)")

    def failed(self, stage: str, key: str, error: BaseException, seconds: float) -> None:
        self._bar(stage).advance(f"{key}: failed")
        self._bars.print(f"[red]failed[/] {stage} {key}: {type(error).__name__}: {error}")


@pipeline.command("run")
@click.argument("spec_name", metavar="SPEC")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Stage calls at once [default: the spec's executor.jobs].")
@click.option("--executor", "executor_name", type=click.Choice(["local", "ray"]),
              help="Where stage calls run [default: the spec's executor.name].")
@click.option("--address", help="Ray: auto or HOST:PORT [default: the spec's executor.address].")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder [default: the spec's output, else generated/pipelines/NAME].")
@click.option("--only", "only", multiple=True, metavar="REPO", help="Only this repository of the spec (repeatable).")
@click.option("--retry-failed", is_flag=True, help="Run again the (task, stage) pairs that failed in earlier runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the funnel as JSON on stdout.")
def pipeline_run(spec_name: str, jobs: int | None, executor_name: str | None, address: str | None,
                 out_dir: Path | None, only: tuple[str, ...], retry_failed: bool, as_json: bool) -> None:
    """Run the batch spec SPEC (a YAML path, or a shipped name: demo, example-real).

    Every (task, stage) is recorded in OUT/state.sqlite as it finishes; a re-run (after Ctrl-C,
    kill -9 or a reboot) does only what is not done. A failure of one task never stops the others:
    its error is in the state store and in its log folder (OUT/<owner>__<name>/logs/<task>/).
    Writes OUT/funnel.json and OUT/funnel.md (per repository and stage). Exits 1 while any
    (task, stage) is failed.
    """
    from repo2env.pipeline.batch import run_pipeline
    from repo2env.pipeline.executors import make_executor
    from repo2env.pipeline.spec import load_pipeline_spec

    spec = load_pipeline_spec(spec_name)
    if out_dir is not None:
        spec = spec.model_copy(update={"output": str(out_dir)})
    unknown = sorted(set(only) - {entry.label for entry in spec.repos} - {entry.repo for entry in spec.repos})
    if unknown:
        raise InputError(f"--only {', '.join(unknown)}: not a repository of the spec",
                         hint=f"the spec lists: {', '.join(entry.label for entry in spec.repos)}")
    kind = executor_name or spec.executor.name
    if kind == "ray":
        # No address anywhere: a Ray head started here for this run.
        executor = make_executor("ray", address=address or spec.executor.address)
    else:
        executor = make_executor(kind, jobs=jobs or spec.executor.jobs)
    with _progress() as bars:
        result = run_pipeline(spec, executor=executor, only=only, retry_failed=retry_failed,
                              events=_PipelineProgress(bars))
    executor.shutdown()
    if as_json:
        stdout.print_json(json.dumps(result.funnel))
    _print_status(result.out_dir)
    console.print(f"funnel: {result.out_dir / 'funnel.md'} (and funnel.json); state: {result.out_dir / 'state.sqlite'}",
                  highlight=False)
    # Non-zero while anything is failed, in this run or left failed by an earlier one (see --retry-failed).
    left_failed = any(counts.get("failed") for entry in result.funnel["repos"].values()
                      for counts in entry["stages"].values()) or result.funnel.get("publish", {}).get("failed")
    sys.exit(1 if result.failed or left_failed else 0)


@pipeline.command("status")
@click.argument("target", metavar="SPEC|DIR")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def pipeline_status(target: str, as_json: bool) -> None:
    """Counts per repository and stage of a pipeline's output folder (or of a spec's)."""
    from repo2env.pipeline.spec import load_pipeline_spec
    from repo2env.pipeline.state import STATE_FILE

    folder = Path(target)
    if not (folder.is_dir() and (folder / STATE_FILE).is_file()):
        folder = load_pipeline_spec(target).output_dir()
    if not (folder / STATE_FILE).is_file():
        raise InputError(f"no pipeline state in {folder}", hint="run 'repo2env pipeline run SPEC' first")
    if as_json:
        from repo2env.pipeline.batch import funnel_of
        from repo2env.pipeline.state import StateStore

        with StateStore(folder) as state:
            stdout.print_json(json.dumps(funnel_of(state)))
        return
    _print_status(folder)


def _print_status(folder: Path) -> None:
    from repo2env.pipeline.batch import funnel_of
    from repo2env.pipeline.state import StateStore

    with StateStore(folder) as state:
        funnel = funnel_of(state)
        runs = state.runs()
    table = Table(title=f"pipeline {folder} ({runs} run{'s' if runs != 1 else ''})")
    for column in ("repository", "PRs", "tasks", "mine", "build", "validate"):
        table.add_column(column)

    def cell(counts: dict[str, int]) -> str:
        colours = {"failed": "red", "running": "yellow", "env_failed": "red", "rejected": "yellow"}
        return ", ".join(f"[{colours.get(key, 'green')}]{key}[/] {value}" for key, value in sorted(counts.items())) or "-"

    for label, entry in funnel["repos"].items():
        stages = entry["stages"]
        table.add_row(entry.get("repo") or label, str(entry.get("prs", {}).get("scanned", 0)), str(entry.get("tasks", 0)),
                      cell(stages.get("mine", {})), cell(stages.get("build", {})), cell(stages.get("validate", {})))
    stdout.print(table)
    if funnel.get("publish"):
        stdout.print(f"publish: {cell(funnel['publish'])}")


def main() -> None:
    """Console entry point: user errors become one line on stderr and a non-zero exit."""
    # SIGTERM (a killed job, a CI timeout) unwinds like Ctrl-C.
    received = {"signal": signal.SIGINT}

    def on_term(signum: int, frame: object) -> None:
        received["signal"] = signal.SIGTERM
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        exit_code = cli.main(standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        _stop_after_interrupt(128 + received["signal"])
    except click.UsageError as exc:
        # One line, like every other user error; the command's help is one flag away.
        click.echo(f"error: {exc.format_message()}", err=True)
        if exc.ctx is not None:
            click.echo(f"hint: see '{exc.ctx.command_path} --help'", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Repo2EnvError as exc:
        # Plain echo, not rich: an error must stay one line whatever the terminal's width.
        click.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno not in _USER_OS_ERRORS:
            raise
        # A read-only or full output folder, a path that is a file: the user's to fix, not a bug.
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"error: {where}{exc.strerror or exc}", err=True)
        click.echo("hint: check that the folder exists, is writable and has free space", err=True)
        sys.exit(1)
    sys.exit(exit_code if isinstance(exit_code, int) else 0)


def _stop_after_interrupt(exit_code: int) -> None:
    """Remove every sandbox still running (other threads' too: build and validate run tasks in a
    pool), say so in one line and exit at once. Queued tasks were cancelled on the way out; what
    finished is already in tasks.jsonl / validation.jsonl (written whole, after each task).

    The exit does not wait for threads still working: a task whose sandbox was removed fails
    quickly, but an image build under way would hold the exit for minutes; the engine abandons
    that build (and removes its step container) when this process's connection closes."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the clean-up short
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    removed = 0
    backend = sys.modules.get("repo2env.runtime.backends.docker")
    if backend is not None:
        try:
            removed = backend.stop_all_sandboxes()
        except Exception:  # noqa: BLE001 - the engine may be what went away; exit all the same
            pass
    click.echo(f"interrupted{f': removed {removed} running sandbox(es)' if removed else ''}; "
               "finished work is saved, re-run to resume", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)


#: OS errors that a user's folder or disk causes (and fixes).
_USER_OS_ERRORS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG,
                             errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG})
