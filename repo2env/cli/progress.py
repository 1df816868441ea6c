"""The one progress display of the CLI (rich, on stderr): a bar per stage or folder."""

from __future__ import annotations

import contextlib

from repo2env.cli.root import console


class Bar:
    """One line of :func:`progress`: a stage's bar (or spinner, without a total) with its last event."""

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


class Bars:
    """The bars of one :func:`progress` display."""

    def __init__(self, progress) -> None:
        self._progress = progress

    def print(self, message: str) -> None:
        """A line above the bars (they stay at the bottom)."""
        self._progress.console.print(message, highlight=False)

    def bar(self, stage: str, description: str, *, total: int | None = None) -> Bar:
        count = f"0/{total}" if total is not None else ""
        return Bar(self._progress, self._progress.add_task(description, stage=stage, total=total, last="", count=count))


@contextlib.contextmanager
def progress(*, off_terminal: bool = True):
    """The one progress display of the CLI (rich, on stderr): a bar per stage or folder, with its
    count and its last event (``off_terminal=False``: none when stderr is not a terminal)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("[bold]{task.fields[stage]}[/] {task.description}"), BarColumn(bar_width=None),
               TextColumn("{task.fields[count]}"), TextColumn("{task.fields[last]}", markup=False), TimeElapsedColumn())
    with Progress(*columns, console=console, disable=not (off_terminal or console.is_terminal)) as progress:
        yield Bars(progress)

