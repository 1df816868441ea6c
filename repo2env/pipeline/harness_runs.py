"""Harness episodes put together for the CLI and scripts: a task from its folder, the backend, the
capturing proxy in front of the model's server, the grader, and ``episodes`` runs of the harness
(``jobs`` sandboxes at once). Each episode's trace lands next to its grading's logs, under the
task folder's ``logs/harness/``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from repo2env import defaults
from repo2env.errors import InputError
from repo2env.harness.agents import harness_agent
from repo2env.harness.proxy import CapturingProxy
from repo2env.harness.run import HarnessOptions, run_harness, trace_path, wait_for_upstream
from repo2env.jsonl import find_task
from repo2env.models import EpisodeTrace, Task
from repo2env.runtime.backend import Backend
from repo2env.runtime.backends import open_backend
from repo2env.verify.grader import Grader


def harness_episodes(instance_id: str, folders: Sequence[Path], agent: str, model_url: str, *,
                     model: str | None = None, api_key: str | None = None, episodes: int = 1, jobs: int = 1,
                     options: HarnessOptions | None = None, backend: Backend | None = None,
                     progress: Callable[[str], None] | None = None) -> list[tuple[EpisodeTrace, Path]]:
    """Run the harness ``agent`` (a name, ``module:Class`` or a command) ``episodes`` times on the task
    ``instance_id`` against the model server at ``model_url``; each graded trace and where it is."""
    task, tasks_path = find_task([Path(folder) / "tasks.jsonl" for folder in folders], instance_id)
    adapter = harness_agent(agent)
    backend = backend or open_backend()
    logs_dir = tasks_path.parent / "logs" / "harness"
    grader = Grader(backend, logs_dir / "grades", timeout_s=grading_timeout(task), keep_warm=episodes > 1)
    grader.expect(episodes)  # one grading an episode: no spare after the last one's
    try:
        with CapturingProxy(model_url, api_key=api_key) as proxy:
            name = model or _served_model(proxy, model_url)

            def one(_: int) -> tuple[EpisodeTrace, Path]:
                trace = run_harness(task, adapter, backend=backend, proxy=proxy, grader=grader, model=name,
                                    logs_dir=logs_dir / "episodes", options=options or HarnessOptions(),
                                    progress=progress)
                return trace, trace_path(trace, logs_dir / "episodes" / trace.episode_id)

            with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="repo2env-harness") as pool:
                return list(pool.map(one, range(episodes)))
    finally:
        grader.close()


def grading_timeout(task: Task) -> float:
    """The task's grading timeout from its validation (10x its gold gradings), else the default."""
    validation = task.validation
    return float(getattr(validation, "grading_timeout_s", None) or defaults.GRADE_TIMEOUT_S)


def _served_model(proxy: CapturingProxy, model_url: str) -> str:
    try:
        names = wait_for_upstream(proxy)
    except (OSError, ValueError) as exc:
        raise InputError(f"the model server at {model_url} does not answer ({exc})",
                         hint="start it (vllm serve / trl vllm-serve) or check --model-url") from None
    if not names:
        raise InputError(f"the model server at {model_url} lists no model", hint="name one with --model")
    return names[0]


@contextmanager
def harness_rollouts(rows, agent: str, model_url: str, *, backend: Backend, logs_dir: Path, model: str | None = None,
                     api_key: str | None = None, jobs: int = defaults.HARNESS_TRAIN_JOBS,
                     options: HarnessOptions | None = None) -> Iterator:
    """A :class:`~repo2env.train.harness.HarnessRollouts` over the tasks of published ``rows`` (a
    dataset split), its proxy open in front of ``model_url`` for as long as the block runs."""
    from repo2env.dataset_rows import task_from_row
    from repo2env.train.harness import HarnessRollouts

    tasks = [task_from_row(dict(row), where="dataset row") for row in rows]
    with CapturingProxy(model_url, api_key=api_key) as proxy:
        rollouts = HarnessRollouts(harness_agent(agent), tasks, backend=backend, proxy=proxy,
                                   model=model or _served_model(proxy, model_url), logs_dir=logs_dir,
                                   options=options or HarnessOptions(), concurrency=jobs,
                                   grade_timeout_s=max(grading_timeout(task) for task in tasks) if tasks else defaults.GRADE_TIMEOUT_S)
        try:
            yield rollouts
        finally:
            rollouts.close()
