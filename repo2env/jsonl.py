"""Reading and writing the pipeline's files: JSONL of tasks, JSON reports. The edges of the data flow.

Writes never leave a half-written file: JSON files are written to a temporary file and renamed;
JSONL lines are appended whole (one ``write`` per line, flushed; a write that fails, on a full
disk say, is cut back off), so an interrupted run leaves only complete rows and a re-run can
resume from them. What a ``kill -9`` or a crash tears anyway, :func:`drop_torn_tail` removes.
Every write to a file happens under an exclusive lock on a lock file beside it (``.NAME.lock``),
and rows are updated by re-reading the file under that lock, so two runs on the same folder never
lose each other's results.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from repo2env.errors import InputError, TaskFormatError
from repo2env.models import RepositoryRecord, Task

#: The repository record of a tasks folder, beside its tasks.jsonl.
REPOSITORY_FILE = "source.json"


def iter_tasks(path: str | os.PathLike[str]) -> Iterator[Task]:
    """Yield the tasks of a JSONL file; a bad line raises an error naming file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no tasks file at {path}", hint="run 'repo2env mine' first, or pass --from DIR")
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            line = _decoded(raw, f"{path}:{lineno}")
            if not line.strip():
                continue
            yield Task.from_json_line(line, where=f"{path}:{lineno}")


def _decoded(raw: bytes, where: str) -> str:
    """A JSONL line as text; a :class:`TaskFormatError` when it is not UTF-8 (a binary file, say)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFormatError(f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})",
                              hint="a tasks file holds one JSON task per line, as 'repo2env mine' writes it") from None


def read_tasks(path: str | os.PathLike[str]) -> list[Task]:
    """All tasks of a JSONL file, validated."""
    return list(iter_tasks(path))


def read_task_ids(path: str | os.PathLike[str]) -> set[str]:
    """The instance ids already in a JSONL file (empty when there is none): what a re-run skips."""
    path = Path(path)
    if not path.is_file():
        return set()
    ids = set()
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            line = _decoded(raw, f"{path}:{lineno}")
            if not line.strip():
                continue
            try:
                ids.add(json.loads(line)["instance_id"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise TaskFormatError(f"{path}:{lineno}: unreadable row (no instance_id)") from None
    return ids


_thread_locks: dict[Path, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


@contextlib.contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (other processes: ``flock`` on ``.NAME.lock`` beside it;
    other threads of this process: a lock per path, as flock does not exclude them)."""
    path = Path(path).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _thread_locks_guard:
        thread_lock = _thread_locks.setdefault(path, threading.Lock())
    with thread_lock, open(path.parent / f".{path.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def append_jsonl(path: str | os.PathLike[str], rows: Iterable[BaseModel]) -> int:
    """Append models as JSONL lines, each written whole and flushed; returns how many."""
    path = Path(path)
    written = 0
    with locked(path):
        # Unbuffered, so a failed write can be undone: a buffered file retries the write on truncate.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            for row in rows:
                line = memoryview((row.model_dump_json() + "\n").encode("utf-8"))
                whole = os.lseek(fd, 0, os.SEEK_END)
                try:
                    while line:
                        line = line[os.write(fd, line):]
                except OSError:
                    # A full disk takes part of the line: cut it off, so the file keeps whole rows only.
                    _cut_back(fd, whole)
                    raise
                written += 1
        finally:
            os.close(fd)
    return written


def _cut_back(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass  # drop_torn_tail repairs the file on the next run


def drop_torn_tail(path: str | os.PathLike[str]) -> int:
    """Cut off a torn last line (bytes after the last newline that are not a whole JSON value, as
    a run killed in the middle of a write leaves them); a whole one only gets its newline back.
    Returns how many bytes were dropped (0: the file is whole, or absent)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return 0
    with path.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        # Read backwards to the last newline: a row can be large, the file larger.
        position, tail = size, b""
        while position > 0 and b"\n" not in tail:
            step = min(65536, position)
            position -= step
            handle.seek(position)
            tail = handle.read(step) + tail
        cut = tail.rfind(b"\n")
        torn = tail[cut + 1:]
        if not torn:
            return 0
        try:
            json.loads(torn)
        except ValueError:  # not JSON, or not UTF-8
            handle.truncate(position + cut + 1)
            return len(torn)
        handle.seek(0, os.SEEK_END)
        handle.write(b"\n")
        return 0


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[BaseModel]) -> int:
    """Replace a JSONL file atomically with these rows; returns how many."""
    lines = [row.model_dump_json() + "\n" for row in rows]
    with locked(path):
        _atomic_write(Path(path), "".join(lines))
    return len(lines)


def write_json_lines(path: str | os.PathLike[str], rows: Iterable[dict[str, Any]]) -> int:
    """Replace a JSONL file atomically with these plain records (an export format); returns how many."""
    lines = [json.dumps(row, ensure_ascii=False) + "\n" for row in rows]
    with locked(path):
        _atomic_write(Path(path), "".join(lines))
    return len(lines)


def update_tasks(path: str | os.PathLike[str], tasks: Iterable[Task]) -> None:
    """Put these tasks into a tasks.jsonl in place of the rows with the same ``instance_id`` (new
    ones at the end), re-reading the file under its lock: rows another run wrote meanwhile stay."""
    updates = {task.instance_id: task for task in tasks}
    path = Path(path)
    with locked(path):
        current = read_tasks(path) if path.is_file() else []
        rows = [updates.pop(task.instance_id, task) for task in current] + list(updates.values())
        _atomic_write(path, "".join(row.model_dump_json() + "\n" for row in rows))


def upsert_jsonl(path: str | os.PathLike[str], rows: Iterable[BaseModel], *, key: str = "instance_id") -> None:
    """Put these rows into a JSONL file in place of the rows with the same ``key`` (new ones at the
    end), atomically and under the file's lock: writing the same row twice leaves it once."""
    updates = {getattr(row, key): row.model_dump_json() + "\n" for row in rows}
    path = Path(path)
    with locked(path):
        lines = [line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                 if line.strip()] if path.is_file() else []
        kept = []
        for line in lines:
            try:
                row_key = json.loads(line).get(key)
            except ValueError:
                continue  # a torn line (a killed writer): its row is written again
            kept.append(updates.pop(row_key, line if line.endswith("\n") else line + "\n"))
        _atomic_write(path, "".join(kept) + "".join(updates.values()))


def drop_rows(path: str | os.PathLike[str], keep: Callable[[dict[str, Any]], bool]) -> int:
    """Rewrite a JSONL file without the rows ``keep`` refuses (under its lock); returns how many went."""
    path = Path(path)
    with locked(path):
        if not path.is_file():
            return 0
        lines = [line for line in path.read_text(encoding="utf-8").splitlines(keepends=True) if line.strip()]
        kept = [line for line in lines if keep(json.loads(line))]
        _atomic_write(path, "".join(kept))
    return len(lines) - len(kept)


def write_json(path: str | os.PathLike[str], payload: BaseModel | dict[str, Any] | list[Any]) -> None:
    """Write a JSON document atomically (pretty-printed, for people and programs alike)."""
    if isinstance(payload, BaseModel):
        text = payload.model_dump_json(indent=2)
    else:
        text = json.dumps(payload, indent=2, sort_keys=False)
    with locked(path):
        _atomic_write(Path(path), text + "\n")


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_repository_record(folder: Path, record: RepositoryRecord) -> None:
    """Record where ``folder``'s repository lives (atomically)."""
    write_json(folder / REPOSITORY_FILE, record)


def read_repository_record(folder: Path) -> RepositoryRecord:
    """The repository record of a tasks folder, its clone checked to exist; InputError saying what to do."""
    path = folder / REPOSITORY_FILE
    if not path.is_file():
        raise InputError(f"{path} is missing", hint="re-run 'repo2env mine' for this repository (it records the clone)")
    try:
        record = RepositoryRecord.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise InputError(f"{path}: not a repository record ({exc.errors()[0]['msg']})",
                         hint="re-run 'repo2env mine' for this repository") from None
    if not Path(record.clone_path).exists():
        raise InputError(f"the clone {record.clone_path} recorded in {path} is gone", hint="re-run 'repo2env mine'")
    return record


def find_task(tasks_files: Iterable[Path], instance_id: str) -> tuple[Task, Path]:
    """The task ``instance_id`` and the tasks.jsonl that holds it; an InputError listing where it looked."""
    looked = []
    for path in tasks_files:
        looked.append(str(path))
        for task in iter_tasks(path):
            if task.instance_id == instance_id:
                return task, path
    raise InputError(f"no task {instance_id} in {', '.join(looked) or 'any tasks.jsonl'}",
                     hint="check the id (owner__name-PR), or pass --from DIR")


def read_unique_tasks(folders: Iterable[Path]) -> list[Task]:
    """The tasks of the folders' tasks.jsonl files, one per instance id, in the order first seen.

    Two folders may hold the same task (the demo's own folder and a pipeline run over the demo,
    both found under generated/): copies of the same instance (repository, base commit, patches,
    statement) are one task, and the copy furthest along is kept (built and accepted, then built
    and validated, then built, then the rest; the first folder's on a tie). Copies that are not the
    same instance, or that were validated to different test lists, are an InputError naming both
    folders: which one is meant is for the user to say (--from)."""
    kept: dict[str, tuple[Task, Path]] = {}
    for folder in folders:
        for task in iter_tasks(Path(folder) / "tasks.jsonl"):
            seen = kept.get(task.instance_id)
            if seen is None:
                kept[task.instance_id] = (task, Path(folder))
                continue
            other, other_folder = seen
            if _instance_key(task) != _instance_key(other):
                raise _conflict(task.instance_id, other_folder, Path(folder), "different instances "
                                "(repository, base commit, patches or problem statement)")
            if _progress_rank(task) > _progress_rank(other):
                kept[task.instance_id] = (task, Path(folder))
            elif (_progress_rank(task) == _progress_rank(other) and _progress_rank(task)[2]
                  and (task.FAIL_TO_PASS, task.PASS_TO_PASS) != (other.FAIL_TO_PASS, other.PASS_TO_PASS)):
                raise _conflict(task.instance_id, other_folder, Path(folder), "the same instance validated to "
                                "different FAIL_TO_PASS / PASS_TO_PASS")
    return [task for task, _ in kept.values()]


def _instance_key(task: Task) -> tuple:
    return task.repo, task.base_commit, task.patch, task.test_patch, task.problem_statement


def _progress_rank(task: Task) -> tuple[int, int, int]:
    """(built, accepted, validated): how far along the pipeline a copy of a task is."""
    built = bool(task.env_spec and task.env_spec.status == "env_ok")
    verdict = task.validation.verdict if task.validation else "pending"
    return int(built), int(verdict == "accepted"), int(verdict != "pending")


def _conflict(instance_id: str, first: Path, second: Path, what: str) -> InputError:
    return InputError(f"task {instance_id} is in {first} and in {second} as {what}",
                      hint="choose the folder to use with --from")
