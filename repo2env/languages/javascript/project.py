"""The files of a JavaScript repository at one commit, and ``package.json`` read from them.

Every inference in this package is a pure function of a :class:`ProjectFiles`: the repository's
files at a commit (a mapping path -> text, or a reader callable with the list of paths) and
nothing else: no network, no subprocess, no Docker.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class FileSource(Protocol):
    """Anything that reads a repository's files at a commit (``RepoFiles`` of the Python spec too)."""

    def read(self, path: str) -> str | None:
        """The text at ``path`` (POSIX, relative to the root), or None when absent or binary."""
        ...

    def listing(self) -> list[str]:
        """Every file path at the commit."""
        ...


@dataclass
class ProjectFiles:
    """A repository's files at one commit, read lazily and at most once each."""

    reader: Callable[[str], str | None]
    paths: list[str]
    _cache: dict[str, str | None] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, source: FileSource | Mapping[str, str] | ProjectFiles, paths: Iterable[str] | None = None,
           ) -> ProjectFiles:
        """Wrap a mapping path -> text, a :class:`FileSource`, or a reader callable with ``paths``."""
        if isinstance(source, ProjectFiles):
            return source
        if isinstance(source, Mapping):
            return cls(reader=source.get, paths=sorted(source) if paths is None else sorted(paths))
        if hasattr(source, "read") and hasattr(source, "listing"):
            return cls(reader=source.read, paths=sorted(source.listing()) if paths is None else sorted(paths))
        if callable(source):
            return cls(reader=source, paths=sorted(paths or ()))
        raise TypeError(f"not a file source: {type(source).__name__}")

    def read(self, path: str) -> str | None:
        """The text at ``path``, or None."""
        if path not in self._cache:
            self._cache[path] = self.reader(path)
        return self._cache[path]

    def exists(self, path: str) -> bool:
        """Whether ``path`` is a file at the commit (read when the listing is not known)."""
        return path in self.paths if self.paths else self.read(path) is not None

    def glob(self, *patterns: str) -> list[str]:
        """Paths matching any of ``patterns`` (fnmatch; ``*`` crosses ``/``), sorted."""
        return sorted(path for path in self.paths if any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns))

    def json(self, path: str) -> dict[str, Any] | None:
        """The JSON object at ``path``; None when absent, malformed or not an object."""
        text = self.read(path)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    def package_json(self, directory: str = "") -> dict[str, Any]:
        """``<directory>/package.json`` as an object (empty when absent or malformed)."""
        return self.json(join(directory, "package.json")) or {}


def join(directory: str, path: str) -> str:
    """``("packages/a", "package.json")`` -> ``"packages/a/package.json"``; ``""`` is the root."""
    return f"{directory.strip('/')}/{path}" if directory.strip("/") else path


def dependencies(package: Mapping[str, Any]) -> dict[str, str]:
    """Every dependency a package.json declares (dev, peer and optional ones too) -> its range."""
    found: dict[str, str] = {}
    for key in ("optionalDependencies", "peerDependencies", "dependencies", "devDependencies"):
        section = package.get(key)
        if isinstance(section, dict):
            found.update({str(name): str(spec) for name, spec in section.items()})
    return found


def scripts(package: Mapping[str, Any]) -> dict[str, str]:
    """The package's npm scripts (name -> command)."""
    section = package.get("scripts")
    return {str(name): str(command) for name, command in section.items()} if isinstance(section, dict) else {}


def restore_fields(base_text: str | None, patched_text: str, fields: Iterable[str]) -> str:
    """``package.json`` as patched, but with ``fields`` as they were at the base commit (a field
    the base lacks is removed): what a grader writes so that a fix keeps its dependency changes
    while the runner's configuration (``jest``, ``mocha``, ``scripts``, ``type``, ``imports``...)
    stays the base's. A patched file that is not a JSON object gives the base text back whole."""
    try:
        patched = json.loads(patched_text)
    except json.JSONDecodeError:
        patched = None
    base = {}
    if base_text is not None:
        try:
            loaded = json.loads(base_text)
            base = loaded if isinstance(loaded, dict) else {}
        except json.JSONDecodeError:
            base = {}
    if not isinstance(patched, dict):
        return base_text if base_text is not None else "{}\n"
    for name in fields:
        if name in base:
            patched[name] = base[name]
        else:
            patched.pop(name, None)
    indent_match = re.search(r"\n([ \t]+)\"", patched_text)
    indent = indent_match.group(1) if indent_match else 2
    return json.dumps(patched, indent=indent, ensure_ascii=False) + "\n"
