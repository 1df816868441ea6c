"""Choose the source for ``--repo``: a local path, a URL to clone, or owner/name on GitHub."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from repo2env.errors import InputError
from repo2env.mine.git import GitSource, looks_like_url
from repo2env.mine.source import Source
from repo2env.models import REPO_NAME_PATTERN
from repo2env.settings import cache_dir


def open_source(spec: str, *, issues_path: Path | None = None, token: str | None = None,
                api_url: str | None = None, name: str | None = None, on_wait: Callable[[str], None] | None = None,
                branch: str | None = None) -> Source:
    """A Source for ``spec``: an existing path or a URL -> local history; owner/name -> GitHub."""
    if name is not None and not REPO_NAME_PATTERN.fullmatch(name):
        raise InputError(f"--name {name!r} is not of the form owner/name")
    # A URL first: it has slashes enough to pass for a path below.
    if looks_like_url(spec):
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", spec.split("://")[-1]).strip("_")
        return GitSource(spec, issues_path=issues_path, workdir=cache_dir() / "urls" / slug, repo=name, branch=branch)
    if Path(spec).expanduser().exists() or spec.startswith(("/", "./", "../", "~")) or spec.count("/") > 1:
        return GitSource(spec, issues_path=issues_path, repo=name, branch=branch)
    if REPO_NAME_PATTERN.fullmatch(spec) and not spec.startswith((".", "/", "~")):
        from repo2env.mine.github import GitHubSource

        if issues_path is not None:
            raise InputError("--issues is for local history; GitHub mode reads issues from the API")
        if branch is not None:
            raise InputError("--branch is for local history; GitHub mode mines every PR whatever its base branch")
        return GitHubSource(spec, token=token, api_url=api_url or "https://api.github.com",
                            workdir=cache_dir() / "github" / spec.replace("/", "__"), on_wait=on_wait)
    raise InputError(f"--repo {spec!r} is neither an existing path, a URL, nor owner/name",
                     hint="e.g. --repo pallets/click, --repo ./click, --repo https://host/org/repo.git")
