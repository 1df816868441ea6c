"""A project's version at many commits of one repository, read in batches.

``version`` is X.Y of the static version the language profile's files state at the commit
(:class:`~repo2env.languages.VersionSources`: Python's pyproject, setup.cfg, setup.py or a package's
``__version__`` file; JavaScript's package.json); the profile also reads its build tools' version
from ``git describe`` output (one process for a batch), such as what setuptools-scm would compute.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from repo2env.errors import SourceError
from repo2env.languages import VersionSources
from repo2env.mine.objects import GitObjects


def static_versions(objects: GitObjects, commits: Sequence[str], sources: VersionSources) -> dict[str, str]:
    """The static version (X.Y, '' when none) at each commit, as ``sources`` (a language
    profile's) say where it is written: the root files of all commits come from one ``git cat-file
    --batch``; only commits whose version lives in a package's files search those
    (:func:`_package_versions`)."""
    unique = list(dict.fromkeys(commits))
    queries = [f"{commit}:{name}" for commit in unique for name in sources.files]
    contents = objects.blobs(queries)
    versions = {}
    for commit in unique:
        for name in sources.files:
            text = contents.get(f"{commit}:{name}")
            version = sources.parse(name, text) if text else None
            if version:
                versions[commit] = major_minor(version)
                break
    rest = [commit for commit in unique if commit not in versions]
    versions.update(_package_versions(objects, rest, sources))
    return versions


def _package_versions(objects: GitObjects, commits: Sequence[str], sources: VersionSources) -> dict[str, str]:
    """The version in a package's files (``sources.package_files``: Python's ``__init__.py``,
    ``_version.py`` ...) of the top-level or ``src/`` folders, for many commits in four ``git
    cat-file --batch`` processes (root trees, their folders, ``src/``'s folders, files)."""
    if not commits:
        return {}
    if not sources.package_files:
        return dict.fromkeys(commits, "")
    roots = objects.objects([f"{commit}^{{tree}}" for commit in commits], "tree")
    folders: dict[str, list[str]] = {}
    for commit in commits:
        names = [name for name, is_tree in _tree_entries(roots.get(f"{commit}^{{tree}}", b"")) if is_tree]
        folders[commit] = [name for name in names if not name.startswith((".", "test", "doc"))]
    listed = objects.objects([f"{commit}:{folder}" for commit in commits for folder in folders[commit]], "tree")
    for commit in commits:
        if "src" in folders[commit]:  # a src layout: its packages are one level down
            src = listed.get(f"{commit}:src", b"")
            inner = [f"src/{name}" for name, is_tree in _tree_entries(src) if is_tree]
            folders[commit] += inner
    listed.update(objects.objects([f"{commit}:{folder}" for commit in commits for folder in folders[commit]
                                   if f"{commit}:{folder}" not in listed], "tree"))
    candidates = {
        commit: [f"{folder}/{name}" for folder in folders[commit]
                 for name, is_tree in _tree_entries(listed.get(f"{commit}:{folder}", b""))
                 if not is_tree and name in sources.package_files]
        for commit in commits
    }
    texts = objects.blobs([f"{commit}:{path}" for commit in commits for path in candidates[commit]])
    versions = {}
    for commit in commits:
        for path in candidates[commit]:
            version = sources.parse(path, texts.get(f"{commit}:{path}", ""))
            if version:
                versions[commit] = major_minor(version)
                break
        else:
            versions[commit] = ""
    return versions


def describe(objects: GitObjects, commits: Sequence[str]) -> dict[str, str]:
    """``git describe --tags --long --always`` of each of ``commits`` (distinct commits of the
    repository): the whole history's nearest version tag, as setuptools-scm asks for it; '' for all
    when the clone has no tag; one ``git describe`` process for the whole batch. A language profile
    reads the versions from it (:meth:`~repo2env.languages.LanguageProfile.scm_version`)."""
    if not commits or not objects.has_tags():
        return dict.fromkeys(commits, "")
    # setuptools-scm's own command (--dirty aside); --always keeps one untagged commit from
    # failing the whole batch (it prints a bare abbreviated SHA instead).
    output = objects.git("describe", "--tags", "--long", "--always", "--match", "*[0-9]*", *commits).split()
    if len(output) != len(commits):
        raise SourceError(f"git describe returned {len(output)} answers for {len(commits)} commits in {objects.path}")
    return dict(zip(commits, output, strict=True))


def _tree_entries(raw: bytes) -> list[tuple[str, bool]]:
    """(name, is a folder) for each entry of a raw git tree object (``<mode> <name>\\0<20-byte id>``)."""
    entries, position = [], 0
    while position < len(raw):
        space = raw.index(b" ", position)
        nul = raw.index(b"\0", space)
        entries.append((raw[space + 1:nul].decode("utf-8", errors="replace"), raw[position:space] == b"40000"))
        position = nul + 21
    return entries


def major_minor(version: str) -> str:
    """``1.2.4.dev5+gabc`` -> ``1.2``: how SWE-bench groups tasks by version."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else version
