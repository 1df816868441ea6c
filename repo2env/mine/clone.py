"""Clones the sources mine from: made once in a workdir, fetched into on every later run.

Both sources clone through :func:`clone_or_fetch`: :class:`~repo2env.mine.git.GitSource` a mirror
of a URL (every ref, ``refs/pull/*`` included), :class:`~repo2env.mine.github.GitHubSource` a
working clone with the branches and PR heads fetched, with its token in git's environment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import git

from repo2env.errors import InputError, SourceError
from repo2env.folders import write_folder

#: Every ref of the remote, as a mirror clone keeps them (fetched with --prune: a deleted branch goes).
MIRROR_REFSPECS = ("+refs/*:refs/*",)
#: The branches and the PR heads GitHub publishes, for a working clone.
PULL_REFSPECS = ("+refs/heads/*:refs/remotes/origin/*", "+refs/pull/*/head:refs/pull/*/head")
#: git never prompts for a password: a clone that needs one fails with git's reason instead.
NO_PROMPT = {"GIT_TERMINAL_PROMPT": "0"}


def clone_or_fetch(url: str, target: Path, *, name: str, mirror: bool, refspecs: Sequence[str],
                   environment: Mapping[str, str] = NO_PROMPT, hint: str | None = None) -> Path:
    """``target``, a clone of ``url`` with ``refspecs`` fetched; ``name`` is what messages call it.

    An existing clone is reused and fetched into, if it is a clone of ``url`` (a clone of another
    URL is refused rather than mined in its place). A new one is made in a staging folder next to
    ``target`` and renamed when complete, so a failed or interrupted clone leaves nothing behind.
    An empty repository is a :class:`SourceError`; messages never show credentials of the URL.
    """
    shown_url = without_credentials(url)
    env = dict(environment)
    if target.exists():
        if not (target / ("HEAD" if mirror else ".git")).exists():
            raise SourceError(f"{target} exists but is not a git {'mirror' if mirror else 'clone'}",
                              hint="remove it or choose another workdir")
        repo = git.Repo(target)
        origin_url = repo.remotes.origin.url if "origin" in repo.remotes else None
        if origin_url != url:
            raise SourceError(f"{target} is a clone of {without_credentials(origin_url or '?')}, not of {shown_url}",
                              hint="choose another workdir for this repository")
        _fetch(repo, refspecs, env, shown_url, hint, prune=mirror)
        if not repo.head.is_valid():
            raise _empty(name)
        return target

    def clone(staging: Path) -> None:
        try:
            repo = git.Repo.clone_from(url, staging, mirror=mirror, env=env)
        except git.GitCommandError as error:
            raise SourceError(f"cannot clone {shown_url}: {git_reason(error)}", hint=hint) from error
        if not repo.head.is_valid():
            raise _empty(name)
        if not mirror:  # a mirror clone already has every ref
            _fetch(repo, refspecs, env, shown_url, hint, prune=False)
        repo.close()

    try:
        write_folder(target, clone)
    except InputError as error:  # another process made the clone meanwhile: it is used next time
        raise SourceError(f"{target} appeared while {name} was being cloned", hint="run again: it is reused") from error
    return target


def _fetch(repo: git.Repo, refspecs: Sequence[str], environment: dict[str, str], shown_url: str,
           hint: str | None, *, prune: bool) -> None:
    try:
        repo.git.fetch(*(["--prune"] if prune else []), "origin", *refspecs, env=environment)
    except git.GitCommandError as error:
        raise SourceError(f"cannot fetch from {shown_url}: {git_reason(error)}", hint=hint) from error


def _empty(name: str) -> SourceError:
    return SourceError(f"repository {name} is empty", hint="it has no commits to mine")


def without_credentials(url: str) -> str:
    """``url`` without the user name and password a clone URL may carry."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return url
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def git_reason(error: git.GitCommandError) -> str:
    """The last ``fatal:``/``error:`` line git printed (GitPython wraps stderr in quotes)."""
    text = str(error.stderr or "").strip().removeprefix("stderr:").strip().strip("'")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    wanted = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines
    if not wanted:
        return f"git exited with {error.status}"
    return wanted[-1].removeprefix("fatal:").removeprefix("error:").strip()
