"""A package's version at many commits of one repository, read in batches.

``version`` is X.Y of the static version in the packaging files (pyproject, setup.cfg, setup.py) or
a package's ``__version__`` file at the commit; ``scm_version`` is what setuptools-scm would compute
there from the whole history (``git describe``, one process for a batch).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence

from repo2env.errors import SourceError
from repo2env.mine.objects import GitObjects

_VERSION_PATTERN = re.compile(r"""^\s*(?:__version__|version|VERSION)\s*[:=]\s*['"]([^'"]+)['"]""", re.MULTILINE)
_VERSION_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
_PACKAGE_VERSION_FILES = ("__init__.py", "_version.py", "version.py", "__about__.py")


def static_versions(objects: GitObjects, commits: Sequence[str]) -> dict[str, str]:
    """The static version (X.Y, '' when none) at each commit: the packaging files of all of them
    come from one ``git cat-file --batch``; only commits whose version lives in a package's files
    search those (:func:`_package_versions`)."""
    unique = list(dict.fromkeys(commits))
    queries = [f"{commit}:{name}" for commit in unique for name in _VERSION_FILES]
    contents = objects.blobs(queries)
    versions = {}
    for commit in unique:
        for name in _VERSION_FILES:
            text = contents.get(f"{commit}:{name}")
            version = _version_from_text(name, text) if text else None
            if version:
                versions[commit] = major_minor(version)
                break
    rest = [commit for commit in unique if commit not in versions]
    versions.update(_package_versions(objects, rest))
    return versions


def _package_versions(objects: GitObjects, commits: Sequence[str]) -> dict[str, str]:
    """The version in a package's files (``__init__.py``, ``_version.py`` ...) of the top-level or
    ``src/`` folders, for many commits in four ``git cat-file --batch`` processes (root trees, their
    folders, ``src/``'s folders, files)."""
    if not commits:
        return {}
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
                 if not is_tree and name in _PACKAGE_VERSION_FILES]
        for commit in commits
    }
    texts = objects.blobs([f"{commit}:{path}" for commit in commits for path in candidates[commit]])
    versions = {}
    for commit in commits:
        for path in candidates[commit]:
            version = _version_from_text(path, texts.get(f"{commit}:{path}", ""))
            if version:
                versions[commit] = major_minor(version)
                break
        else:
            versions[commit] = ""
    return versions


def scm_versions(objects: GitObjects, commits: Sequence[str]) -> dict[str, str]:
    """The version setuptools-scm would compute at each of ``commits`` (distinct commits of the
    repository) from the whole history (see :func:`scm_version_from_describe`), '' where no version
    tag is reachable; one ``git describe`` process for the whole batch."""
    if not commits or not objects.has_tags():
        return dict.fromkeys(commits, "")
    # setuptools-scm's own command (--dirty aside); --always keeps one untagged commit from
    # failing the whole batch (it prints a bare abbreviated SHA instead).
    output = objects.git("describe", "--tags", "--long", "--always", "--match", "*[0-9]*", *commits).split()
    if len(output) != len(commits):
        raise SourceError(f"git describe returned {len(output)} answers for {len(commits)} commits in {objects.path}")
    return {commit: scm_version_from_describe(line) for commit, line in zip(commits, output, strict=True)}


def _tree_entries(raw: bytes) -> list[tuple[str, bool]]:
    """(name, is a folder) for each entry of a raw git tree object (``<mode> <name>\\0<20-byte id>``)."""
    entries, position = [], 0
    while position < len(raw):
        space = raw.index(b" ", position)
        nul = raw.index(b"\0", space)
        entries.append((raw[space + 1:nul].decode("utf-8", errors="replace"), raw[position:space] == b"40000"))
        position = nul + 21
    return entries




def _version_from_text(path: str, text: str) -> str | None:
    if path.endswith("pyproject.toml"):
        try:
            project = tomllib.loads(text).get("project", {})
        except tomllib.TOMLDecodeError:
            return None
        version = project.get("version")
    else:
        match = _VERSION_PATTERN.search(text)
        version = match.group(1) if match else None
    # A fallback such as `__version__ = "unknown"` (when setuptools-scm's file is missing) is no version.
    return version if isinstance(version, str) and re.match(r"v?\d", version) else None


_DESCRIBE = re.compile(r"^(?P<tag>.+)-(?P<distance>\d+)-(?P<node>g[0-9a-f]+)$")
# setuptools-scm's default tag_regex: an optional "name-" prefix, an optional v, the version.
_TAG_VERSION = re.compile(r"^(?:[\w-]+-)?(?P<version>[vV]?\d+(?:\.\d+){0,2}[^+]*)(?:\+.*)?$")


def scm_version_from_describe(described: str) -> str:
    """The PEP 440 version setuptools-scm's defaults (guess-next-dev, node-and-date) derive from
    ``git describe --tags --long`` output: ``v1.2.3-0-gabc`` -> ``1.2.3``, ``v1.2.3-5-gabc`` ->
    ``1.2.4.dev5+gabc``; '' for a bare SHA (no tag) or a tag that is no version."""
    from packaging.version import InvalidVersion, Version

    match = _DESCRIBE.match(described.strip())
    tag = _TAG_VERSION.match(match.group("tag")) if match else None
    if match is None or tag is None:
        return ""
    try:
        version = Version(tag.group("version"))
    except InvalidVersion:
        return ""
    distance = int(match.group("distance"))
    if distance == 0:
        return str(version)
    public = version.public
    if ".dev" in public:  # a dev tag is the next release's: 1.0.dev0 + 3 -> 1.0.dev3
        prefix, _, tail = public.rpartition(".dev")
        if tail != "0":
            return ""  # setuptools-scm refuses these too
        guessed = prefix
    else:  # bump the last number: 1.2.3 -> 1.2.4, 1.0rc1 -> 1.0rc2
        last = re.match(r"(.*?)(\d+)$", public)
        if last is None:
            return ""
        guessed = f"{last.group(1)}{int(last.group(2)) + 1}"
    return f"{guessed}.dev{distance}+{match.group('node')}"


def major_minor(version: str) -> str:
    """``1.2.4.dev5+gabc`` -> ``1.2``: how SWE-bench groups tasks by version."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else version
