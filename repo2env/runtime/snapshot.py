"""A repository at one commit, as the agent's world: its files, and a fresh one-commit git repo.

The snapshot carries no history: no earlier commits, no remote, no tags, no reflog, no stash, no
hooks. Its single commit has a fixed author and date, so the same tree always gives the same
snapshot SHA, which grading and ``diff()`` use as "the original".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from repo2env.errors import BuildError, SourceError

SNAPSHOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "repo2env", "GIT_AUTHOR_EMAIL": "snapshot@repo2env.invalid",
    "GIT_COMMITTER_NAME": "repo2env", "GIT_COMMITTER_EMAIL": "snapshot@repo2env.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+00:00", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+00:00",
}
#: Git settings that keep the host's configuration out of the snapshot.
_ISOLATED = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"}


class GitRepoFiles:
    """The files of ``repo_path`` at ``commit`` (the RepoFiles protocol of :mod:`repo2env.languages.python.spec`)."""

    def __init__(self, repo_path: Path, commit: str) -> None:
        self.repo_path = Path(repo_path)
        self.commit = commit

    def _git(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(self.repo_path), *args], capture_output=True)

    @cached_property
    def _listing(self) -> list[str]:
        result = self._git("ls-tree", "-r", "-z", "--name-only", self.commit)
        if result.returncode != 0:
            raise SourceError(f"commit {self.commit[:12]} is not in {self.repo_path}: {result.stderr.decode().strip()}")
        return [name for name in result.stdout.decode("utf-8", "replace").split("\0") if name]

    def listing(self) -> list[str]:
        """Every file path at the commit."""
        return list(self._listing)

    def read(self, path: str) -> str | None:
        """A file's text at the commit, or None when it does not exist."""
        result = self._git("cat-file", "blob", f"{self.commit}:{path}")
        return result.stdout.decode("utf-8", "replace") if result.returncode == 0 else None

    def commit_date(self) -> datetime:
        """The commit's committer date."""
        result = self._git("show", "-s", "--format=%cI", self.commit)
        return datetime.fromisoformat(result.stdout.decode().strip()).astimezone(UTC)


def export_tree(repo_path: Path, commit: str, dest: Path) -> None:
    """Write exactly the files tracked at ``commit`` into ``dest`` (export-ignore rules do not apply,
    unlike ``git archive``; submodules are left out)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="repo2env-index-") as scratch:
        env = {**os.environ, **_ISOLATED, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        # An explicit work tree lets this run on bare mirrors as well as on clones.
        for args in (["read-tree", commit], ["checkout-index", "--all", "--force"]):
            result = subprocess.run(["git", "-C", str(repo_path), f"--work-tree={dest}", *args], env=env,
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise BuildError(f"cannot export {commit[:12]} from {repo_path}: {result.stderr.strip()[:300]}")


def make_snapshot(repo_path: Path, commit: str, dest: Path) -> str:
    """Export ``commit`` into ``dest`` as a fresh one-commit git repository; returns its SHA."""
    if dest.exists():
        shutil.rmtree(dest)
    export_tree(repo_path, commit, dest)
    env = {**os.environ, **_ISOLATED, **SNAPSHOT_IDENTITY}
    steps = (
        ["init", "--quiet", "--template=", "--initial-branch=main"],
        ["config", "core.logAllRefUpdates", "false"],
        ["config", "user.name", "agent"],
        ["config", "user.email", "agent@repo2env.invalid"],
        ["add", "--all", "--force"],
        ["commit", "--quiet", "--no-verify", "--allow-empty", "-m", "snapshot"],
    )
    for args in steps:
        result = subprocess.run(["git", "-C", str(dest), *args], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(f"cannot make the snapshot repository: git {args[0]}: {result.stderr.strip()[:300]}")
    for leftover in ("logs", "COMMIT_EDITMSG", "ORIG_HEAD", "FETCH_HEAD", "description", "hooks"):
        path = dest / ".git" / leftover
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    sha = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True, text=True, env=env)
    return sha.stdout.strip()
