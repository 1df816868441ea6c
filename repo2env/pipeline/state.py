"""The pipeline's state: one SQLite database per output folder (``state.sqlite``).

Every (item, stage) has a row: its status (``running``, ``done``, ``failed``), the outcome a done
stage reached (``env_ok``, ``accepted`` ...), how many attempts it took, the last error and the
timings. Every write is one transaction, committed before the run goes on, so a run killed at any
point (Ctrl-C, ``kill -9``, a reboot) leaves rows that say exactly what finished; a row still
``running`` belongs to a run that died, and its stage is done again. The stages' outputs are
written before their row says ``done`` and are keyed by task, so doing a stage again replaces its
output instead of duplicating it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from repo2env.errors import InputError

STATE_FILE = "state.sqlite"
#: The item of a stage that runs once for the whole batch (publish).
BATCH_ITEM = "*"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS stages (
    item TEXT NOT NULL,          -- a task's instance id; a repository's label (mine); '*' (publish)
    stage TEXT NOT NULL,
    repo TEXT NOT NULL,          -- the repository's label in the spec
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
    outcome TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    started_at REAL,
    finished_at REAL,
    seconds REAL,                -- the stage call's own time, measured where it ran
    run_id INTEGER,
    PRIMARY KEY (item, stage)
);
CREATE TABLE IF NOT EXISTS repos (
    label TEXT PRIMARY KEY,      -- as the spec names it
    repo TEXT NOT NULL,          -- owner/name, as its tasks name it
    folder TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    finished_at REAL,
    outcome TEXT
);
"""


@dataclass(frozen=True)
class StageRow:
    """One (item, stage) of the state store."""

    item: str
    stage: str
    repo: str
    status: str
    outcome: str | None
    attempts: int
    error: str | None
    seconds: float | None


class StateStore:
    """The state database of one output folder. Used from one thread (the runner's)."""

    def __init__(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / STATE_FILE
        try:
            # Autocommit mode: every write below is its own explicit transaction.
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # a committed row survives a power loss too
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path}: not a pipeline state database ({exc})",
                             hint="pass another output folder, or move this file away") from None
        self.run_id: int | None = None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _write(self, sql: str, parameters: tuple = ()) -> sqlite3.Cursor:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            cursor = self._db.execute(sql, parameters)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return cursor

    # --- runs ---

    def begin_run(self) -> int:
        """Record that a run starts; its id marks the rows it writes."""
        self.run_id = self._write("INSERT INTO runs (started_at) VALUES (?)", (time.time(),)).lastrowid
        return self.run_id

    def end_run(self, outcome: str) -> None:
        self._write("UPDATE runs SET finished_at = ?, outcome = ? WHERE id = ?", (time.time(), outcome, self.run_id))

    def runs(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    # --- repositories ---

    def set_repo(self, label: str, repo: str, folder: Path) -> None:
        self._write("INSERT INTO repos (label, repo, folder) VALUES (?, ?, ?) ON CONFLICT (label) DO UPDATE "
                    "SET repo = excluded.repo, folder = excluded.folder", (label, repo, str(folder)))

    def repos(self) -> dict[str, tuple[str, Path]]:
        """label -> (owner/name, tasks folder) of every repository mined so far."""
        return {label: (repo, Path(folder)) for label, repo, folder in
                self._db.execute("SELECT label, repo, folder FROM repos ORDER BY label")}

    # --- stages ---

    def start(self, item: str, stage: str, repo: str) -> None:
        """A stage call starts: one more attempt."""
        self._write(
            "INSERT INTO stages (item, stage, repo, status, attempts, started_at, run_id) VALUES (?, ?, ?, 'running', 1, ?, ?) "
            "ON CONFLICT (item, stage) DO UPDATE SET status = 'running', attempts = attempts + 1, error = NULL, "
            "outcome = NULL, started_at = excluded.started_at, finished_at = NULL, seconds = NULL, run_id = excluded.run_id",
            (item, stage, repo, time.time(), self.run_id))

    def finish(self, item: str, stage: str, outcome: str | None, seconds: float) -> None:
        self._write("UPDATE stages SET status = 'done', outcome = ?, finished_at = ?, seconds = ? "
                    "WHERE item = ? AND stage = ?", (outcome, time.time(), seconds, item, stage))

    def fail(self, item: str, stage: str, repo: str, error: str, seconds: float) -> None:
        """A stage call failed (or could not be prepared: then it is counted as an attempt)."""
        self._write(
            "INSERT INTO stages (item, stage, repo, status, attempts, error, finished_at, seconds, run_id) "
            "VALUES (?, ?, ?, 'failed', 1, ?, ?, ?, ?) ON CONFLICT (item, stage) DO UPDATE SET status = 'failed', "
            "error = excluded.error, finished_at = excluded.finished_at, seconds = excluded.seconds, "
            "attempts = attempts + (stages.status != 'running')",
            (item, stage, repo, error[-2000:], time.time(), seconds, self.run_id))

    def status(self, item: str, stage: str) -> str | None:
        """``done``, ``failed``, ``running`` (a run died in it) or None (never started)."""
        row = self._db.execute("SELECT status FROM stages WHERE item = ? AND stage = ?", (item, stage)).fetchone()
        return row[0] if row else None

    def rows(self, *, repo: str | None = None) -> Iterator[StageRow]:
        query = "SELECT item, stage, repo, status, outcome, attempts, error, seconds FROM stages"
        parameters: tuple = ()
        if repo is not None:
            query, parameters = query + " WHERE repo = ?", (repo,)
        for row in self._db.execute(query + " ORDER BY repo, item, stage", parameters):
            yield StageRow(*row)

    def counts(self) -> dict[str, dict[str, dict[str, int]]]:
        """repo label -> stage -> {status or outcome: count}: what ``pipeline status`` shows."""
        counts: dict[str, dict[str, dict[str, int]]] = {}
        for repo, stage, status, outcome, number in self._db.execute(
                "SELECT repo, stage, status, outcome, COUNT(*) FROM stages GROUP BY repo, stage, status, outcome"):
            key = outcome if status == "done" and outcome else status
            by_stage = counts.setdefault(repo, {}).setdefault(stage, {})
            by_stage[key] = by_stage.get(key, 0) + number
        return counts
