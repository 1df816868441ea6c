"""The tasks a server hands out: the rows of a published dataset folder, by instance id.

A server (``repo2env serve``) starts episodes by task id, or, without one, on the next task of the
dataset in turn, so that clients that never name a task still cover the whole dataset.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from repo2env.dataset_rows import load_published
from repo2env.errors import InputError


class TaskCatalog:
    """Published dataset rows by ``instance_id``, in dataset order, with a shared round-robin cursor."""

    def __init__(self, rows: Sequence[dict[str, Any]]) -> None:
        if not rows:
            raise InputError("the dataset has no rows", hint="publish accepted tasks with 'repo2env publish --to DIR'")
        self._rows = {row["instance_id"]: dict(row) for row in rows}
        self._order = list(self._rows)
        self._cursor = itertools.cycle(self._order)
        self._lock = threading.Lock()

    @classmethod
    def from_published(cls, folder: Path, *, split: str | None = None) -> TaskCatalog:
        """The rows of a folder ``repo2env publish --to DIR`` wrote (every split, or only ``split``)."""
        folder = Path(folder)
        if not (folder / "data").is_dir():
            raise InputError(f"{folder} is not a published dataset (no data/ folder)",
                             hint="pass the folder 'repo2env publish --to DIR' wrote")
        splits = load_published(folder)
        if split is not None and split not in splits:
            raise InputError(f"{folder} has no split {split!r}", hint=f"choose one of {', '.join(splits)}")
        chosen = [split] if split else list(splits)
        return cls([row for name in chosen for row in splits[name]])

    @property
    def task_ids(self) -> list[str]:
        """Every task id, in dataset order."""
        return list(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def row(self, task_id: str) -> dict[str, Any]:
        """The row of ``task_id``; an InputError naming a few known ids when there is none."""
        if task_id not in self._rows:
            known = ", ".join(self._order[:5]) + (" ..." if len(self._order) > 5 else "")
            raise InputError(f"unknown task id {task_id!r}", hint=f"known ids: {known}")
        return self._rows[task_id]

    def pick(self, seed: int | None = None) -> dict[str, Any]:
        """The row for an episode that names no task: ``seed`` picks one deterministically, otherwise
        the next one in turn (shared by every session of the process)."""
        if seed is not None:
            return self._rows[self._order[seed % len(self._order)]]
        with self._lock:
            return self._rows[next(self._cursor)]
