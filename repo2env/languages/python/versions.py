"""Where a Python project writes its version, and the version setuptools-scm derives from git."""

from __future__ import annotations

import re
import tomllib

from repo2env.languages.base import VersionSources

_VERSION_PATTERN = re.compile(r"""^\s*(?:__version__|version|VERSION)\s*[:=]\s*['"]([^'"]+)['"]""", re.MULTILINE)


def version_from_text(path: str, text: str) -> str | None:
    """The version ``pyproject.toml``'s ``[project]``, or a ``version = "..."`` /
    ``__version__ = "..."`` line of any other file, states; None when it states none."""
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


PYTHON_VERSION_SOURCES = VersionSources(
    files=("pyproject.toml", "setup.cfg", "setup.py"),
    package_files=("__init__.py", "_version.py", "version.py", "__about__.py"),
    parse=version_from_text,
)

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
