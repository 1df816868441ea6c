"""Repository layout conventions most ecosystems share: test trees and documentation.

Profiles build their path rules on these (:mod:`repo2env.languages.python.paths`,
:mod:`repo2env.languages.javascript.paths`): a ``tests/`` folder or a ``CHANGELOG.md`` means the
same in a Python, a JavaScript or a Go repository.
"""

from __future__ import annotations

import re

#: A test tree at any depth (searched in the path's folder part, with its trailing ``/``): a folder
#: named (any case) ``test``, ``tests``, ``testing``, ``testsuite``, ``__tests__``,
#: ``test_*``/``tests-*`` or ``*_test(s)``/``*-test(s)``.
TEST_DIR = re.compile(
    r"(?:^|/)(?:tests?|testing|testsuite|__tests__|tests?[_-][\w.-]*|[\w.-]*[_-]tests?)/",
    re.IGNORECASE,
)
#: Documentation and changelog-fragment folders (towncrier, reno) at any depth.
AUX_DIR = re.compile(
    r"(?:^|/)(?:docs?|changelog\.d|changelog|changes|newsfragments|news|release[-_]?notes)/",
    re.IGNORECASE,
)
#: Documentation folders alone (``docs/``, ``doc/``).
DOCS_DIR = re.compile(r"(?:^|/)docs?/", re.IGNORECASE)
_AUX_NAME = re.compile(
    r"(?:changes|changelog|history|news|authors|contributors|readme|release[-_ ]?notes)(?:[._-][^/]*)?",
    re.IGNORECASE,
)
_PROSE_EXTENSIONS = frozenset({".md", ".rst", ".markdown", ".adoc"})
_TEXT_EXTENSIONS = _PROSE_EXTENSIONS | {"", ".txt"}


def split_path(path: str) -> tuple[str, str, str]:
    """(folder with its trailing ``/``, file name, lower-case extension) of a repository path; a
    leading ``./`` is dropped and a dot-file (``.mocharc``) has no extension."""
    if path.startswith("./"):
        path = path[2:]
    slash = path.rfind("/")
    directory, name = path[: slash + 1], path[slash + 1 :]
    dot = name.rfind(".")
    return directory, name, name[dot:].lower() if dot > 0 else ""


def is_aux(directory: str, name: str, extension: str) -> bool:
    """Whether a file is documentation or a changelog: prose (``*.md``, ``*.rst``, ``*.markdown``,
    ``*.adoc``) at any level, anything under :data:`AUX_DIR`, and files named ``CHANGES*``,
    ``CHANGELOG*``, ``HISTORY*``, ``NEWS*``, ``AUTHORS*``, ``CONTRIBUTORS*``, ``README*`` or
    ``RELEASE*NOTES*`` (any case) with no extension or a text one (``.txt``, ``.md`` ...), so a
    package's ``news.json`` is not. Profiles decide first whether their code files may be aux."""
    return (
        extension in _PROSE_EXTENSIONS
        or bool(AUX_DIR.search(directory))
        or (extension in _TEXT_EXTENSIONS and bool(_AUX_NAME.fullmatch(name)))
    )
