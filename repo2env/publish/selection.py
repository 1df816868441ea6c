"""Which tasks leave repo2env: the one rule that publishing, every export and the demos apply.

A task goes out when its environment is built (``env_ok``: an image that runs) and validation
accepted it; ``include_rejected`` lets rejected and never-validated tasks out too, never a task
without a working image (nothing could run it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from repo2env.jsonl import read_unique_tasks
from repo2env.models import Task


def left_out_because(task: Task, *, include_rejected: bool = False) -> str | None:
    """Why ``task`` stays in (``not_built``, ``env_failed``, ``rejected``, ``pending``: never
    validated), or None when it goes out."""
    if not (task.env_spec and task.env_spec.status == "env_ok"):
        return "env_failed" if task.env_spec else "not_built"
    verdict = task.validation.verdict if task.validation else "pending"
    if verdict == "accepted" or include_rejected:
        return None
    return verdict


@dataclass
class Selection:
    """The tasks that go out, in the order they were read, and how many stay in, by reason."""

    tasks: list[Task] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)


def select_tasks(tasks: Iterable[Task], *, include_rejected: bool = False) -> Selection:
    """The tasks of ``tasks`` that go out (see :func:`left_out_because`)."""
    selection = Selection()
    for task in tasks:
        reason = left_out_because(task, include_rejected=include_rejected)
        if reason is None:
            selection.tasks.append(task)
        else:
            selection.left_out[reason] += 1
    return selection


def select_from_folders(folders: Sequence[Path], *, include_rejected: bool = False) -> Selection:
    """:func:`select_tasks` over the tasks.jsonl of the task folders, one task per instance id
    (:func:`repo2env.jsonl.read_unique_tasks`: two folders holding different content under one id
    are an InputError)."""
    return select_tasks(read_unique_tasks(folders), include_rejected=include_rejected)
