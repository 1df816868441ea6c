"""The per-task stages (build, validate) as the runner runs them, and the folder loops of
``repo2env build`` / ``repo2env validate`` on top of the one runner.

Each stage is a job type (what one call needs, picklable), a top-level work function from that job
to the stage's typed output, and a record step that writes the output under the file's lock. A
work function called without a backend opens the one its job names, once per worker process
(:func:`worker_backend`), so it runs as well on a thread of this process as on a remote worker.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from repo2env import defaults
from repo2env.jsonl import append_jsonl, drop_rows, drop_torn_tail, read_tasks, update_tasks
from repo2env.languages.python.spec.overrides import EnvOverride
from repo2env.models import EnvSpec, Task, ValidationReport
from repo2env.pipeline.executors import ThreadExecutor
from repo2env.pipeline.runner import Stage, run_stages
from repo2env.runtime.backend import Backend
from repo2env.runtime.backends import backend_name, open_backend
from repo2env.runtime.bootstrap import makeable_pythons
from repo2env.runtime.build import (
    COLLECT_TIMEOUT_S,
    STALL_IDLE_S,
    BuildOptions,
    BuildSummary,
    build_task,
    read_source_clone,
    still_built,
)
from repo2env.runtime.images import ImageStore, local_base_flavours
from repo2env.validate.acceptance import AcceptancePolicy
from repo2env.validate.report import write_figure, write_quality_figure, write_summary
from repo2env.validate.run import PolicyRunner, ValidationSummary, read_records, validate_task


def worker_backend(name: str = "") -> Backend:
    """This process's backend ``name`` (default: ``REPO2ENV_BACKEND``, else docker), opened once per
    worker process."""
    return _opened(backend_name(name or None))


@functools.cache
def _opened(name: str) -> Backend:
    return open_backend(name)


def safe_name(instance_id: str) -> str:
    """A task id as a file or folder name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", instance_id)


# --- build ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildJob:
    """What building one task's environment needs."""

    task: Task
    clone: Path
    logs_dir: Path
    override: EnvOverride | None = None
    collect_check: bool = True
    collect_timeout_s: float = COLLECT_TIMEOUT_S
    bases: tuple[str, ...] | None = None  #: base-image flavours a build may use (None: the bootstrappable ones)
    stall_idle_s: float = STALL_IDLE_S
    backend: str = ""  #: the backend a worker opens for it (default: REPO2ENV_BACKEND, else docker)


@dataclass(frozen=True)
class BuildOutput:
    """One task's environment: its spec (env_ok or env_failed), and whether the image was reused."""

    env_spec: EnvSpec
    reused: bool


def build_work(job: BuildJob, runtime: Backend | None = None) -> BuildOutput:
    """The build stage: reuse the task's image when it is still the recorded one, else build it."""
    runtime = runtime or worker_backend(job.backend)
    store = ImageStore(runtime)
    if still_built(job.task, store, job.override):
        return BuildOutput(job.task.env_spec, reused=True)
    spec = build_task(job.task, job.clone, store=store, runtime=runtime, logs_dir=job.logs_dir,
                      override=job.override, collect_check=job.collect_check, bases=job.bases,
                      collect_timeout_s=job.collect_timeout_s, stall_idle_s=job.stall_idle_s)
    return BuildOutput(spec, reused=False)


def available_bases(runtime: Backend) -> tuple[str, ...]:
    """The base-image flavours a build may use: those on the backend (``py3.8``, ``node20`` ...:
    pulled, or made before), and the ``py<X.Y>`` of every Python a local CPython can make one for
    (the build makes it when a task needs it); they widen what a language's recipe may choose
    beyond the ones every machine can bootstrap."""
    return tuple(sorted({*local_base_flavours(runtime), *(f"py{python}" for python in makeable_pythons())}))


def build_job(task: Task, clone: Path, logs_dir: Path, options: BuildOptions, bases: tuple[str, ...] | None,
              backend: str = "") -> BuildJob:
    """The build job of ``task`` under ``options``, for backend ``backend``."""
    return BuildJob(task=task, clone=clone, logs_dir=logs_dir, override=options.overrides.get(task.repo),
                    collect_check=options.collect_check, collect_timeout_s=options.collect_timeout_s,
                    bases=bases, stall_idle_s=options.stall_idle_s, backend=backend)


def build_tasks_dir(tasks_dir: Path, *, runtime: Backend, options: BuildOptions | None = None,
                    progress: Callable[[Task, EnvSpec], None] | None = None) -> BuildSummary:
    """Build every task of ``tasks_dir/tasks.jsonl`` (or ``options.instance_ids``); each task's row
    gets its ``env_spec`` as soon as it is built (only that row, under the file's lock)."""
    options = options or BuildOptions()
    tasks_path = tasks_dir / "tasks.jsonl"
    tasks = read_tasks(tasks_path)
    clone = read_source_clone(tasks_dir)
    summary = BuildSummary(tasks_path=tasks_path)
    selected = [task for task in tasks if not options.instance_ids or task.instance_id in options.instance_ids]
    bases = available_bases(runtime)
    logs_dir = tasks_dir / "logs" / "build"

    def record(task: Task, job: BuildJob, output: BuildOutput) -> Task:
        summary.add(task, output.env_spec, output.reused)
        # Written after every task: an interrupted build keeps what it finished, and a concurrent
        # run's rows stay.
        built = task.model_copy(update={"env_spec": output.env_spec})
        update_tasks(tasks_path, [built])
        if progress:
            progress(task, output.env_spec)
        return built

    stage = Stage("build", build_work, prepare=lambda task: build_job(task, clone, logs_dir, options, bases),
                  record=record, work_options={"runtime": runtime})
    executor = ThreadExecutor(options.jobs, name="repo2env-build")
    run_stages(selected, [stage], executor=executor, key=lambda task: task.instance_id)
    executor.shutdown()
    return summary


def folder_builder(runtime: Backend) -> Callable[[Path, frozenset[str]], tuple[int, dict[str, str]]]:
    """Builds the given tasks of a tasks folder: (how many built, {instance id: why not}) (for ``pull``)."""

    def build_some(folder: Path, instance_ids: frozenset[str]) -> tuple[int, dict[str, str]]:
        built = build_tasks_dir(folder, runtime=runtime, options=BuildOptions(instance_ids=instance_ids))
        return built.ok, built.failures

    return build_some


# --- validate -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidateJob:
    """What validating one task needs."""

    task: Task
    policy: AcceptancePolicy
    logs_dir: Path
    policy_k: int = 0
    backend: str = ""  #: the backend a worker opens for it (default: REPO2ENV_BACKEND, else docker)


@dataclass(frozen=True)
class ValidateOutput:
    """One task with its tests and verdict filled in, and its validation record."""

    task: Task
    record: ValidationReport


def validate_work(job: ValidateJob, runtime: Backend | None = None,
                  policy_runner: PolicyRunner | None = None) -> ValidateOutput:
    """The validate stage: derive the tests, grade the reference rollouts, judge."""
    task, record = validate_task(job.task, runtime or worker_backend(job.backend), job.policy, logs_dir=job.logs_dir,
                                 policy_runner=policy_runner, policy_k=job.policy_k)
    return ValidateOutput(task, record)


def validate_dir(tasks_dir: Path, runtime: Backend, policy: AcceptancePolicy, *, jobs: int = defaults.VALIDATE_JOBS,
                 policy_runner: PolicyRunner | None = None, policy_k: int = 0, force: bool = False,
                 instance_ids: frozenset[str] = frozenset(),
                 progress: Callable[[ValidationReport], None] | None = None) -> ValidationSummary:
    """Validate every task of ``tasks_dir`` (resuming: tasks already in validation.jsonl are skipped)."""
    tasks_path, records_path = tasks_dir / "tasks.jsonl", tasks_dir / "validation.jsonl"
    tasks = read_tasks(tasks_path)
    selected = [task for task in tasks if not instance_ids or task.instance_id in instance_ids]
    drop_torn_tail(records_path)  # a record cut short by a killed run: that task is validated again
    if force:
        # Only the selected tasks' records go: `--force --task ID` re-validates that task alone.
        forced = {task.instance_id for task in selected}
        drop_rows(records_path, lambda row: row.get("instance_id") not in forced)
    done = {record.instance_id for record in read_records(records_path)}
    summary = ValidationSummary(tasks_dir=tasks_dir)
    todo = [task for task in selected if task.instance_id not in done]
    summary.skipped = len(tasks) - len(todo)
    logs_dir = tasks_dir / "logs" / "validate"

    def record(task: Task, job: ValidateJob, output: ValidateOutput) -> Task:
        # tasks.jsonl first (its row, under the file's lock), then the record: the record is what
        # makes a re-run skip the task, so an interruption between the two only validates it again.
        update_tasks(tasks_path, [output.task])
        append_jsonl(records_path, [output.record])
        summary.records.append(output.record)
        if progress:
            progress(output.record)
        return output.task

    stage = Stage("validate", validate_work,
                  prepare=lambda task: ValidateJob(task, policy, logs_dir / task.instance_id, policy_k),
                  record=record, work_options={"runtime": runtime, "policy_runner": policy_runner})
    executor = ThreadExecutor(jobs, name="repo2env-validate")
    run_stages(todo, [stage], executor=executor, key=lambda task: task.instance_id)
    executor.shutdown()
    write_validation_reports(tasks_dir, policy, total_tasks=len(tasks))
    return summary


def write_validation_reports(tasks_dir: Path, policy: AcceptancePolicy, *, total_tasks: int) -> None:
    """summary.md, validation.png and quality.png of a tasks folder, from every record in its validation.jsonl."""
    all_records = read_records(tasks_dir / "validation.jsonl")
    write_summary(tasks_dir / "summary.md", all_records, policy=policy, funnel_path=tasks_dir / "funnel.json",
                  total_tasks=total_tasks)
    write_figure(tasks_dir / "validation.png", all_records)
    write_quality_figure(tasks_dir / "quality.png", all_records)
