"""Why an install failed, read from its log."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import TYPE_CHECKING

from repo2env.languages.build import plain_log
from repo2env.languages.python.spec.system_packages import COMPILER_PACKAGES

if TYPE_CHECKING:
    pass


_FAILED_BUILD = re.compile(r"Failed to (?:download and )?build `([A-Za-z0-9_.-]+)==([^`\s]+)`")
_PROJECT_BUILD = re.compile(r"Failed to (?:download and )?build `(?:([A-Za-z0-9_.-]+) @ )?file://")
_NO_COMPILER = re.compile(r"(?:command|execute) '?[\w./-]*(?:gcc|cc|g\+\+|c\+\+|clang)'? failed|Python\.h: No such file|"
                          r"No such file or directory: '[\w./-]*gcc'|gcc: not found|"
                          r"unable to execute '[\w./-]*gcc'|could not find a C compiler|"
                          r"No working compiler found", re.IGNORECASE)  # the last: cffi's setup.py
_NO_RUST = re.compile(r"can't find Rust compiler|cargo: not found|rustc: not found", re.IGNORECASE)
#: What :func:`install_failure_reason` says when a source build lacked a compiler.
MISSING_COMPILER = "no C/Rust compiler in the image"
# Headers old sdists compile against -> the Debian package that has them.
_HEADER_PACKAGES = {
    "Python.h": "python3-dev", "ffi.h": "libffi-dev", "openssl/": "libssl-dev", "libxml/": "libxml2-dev",
    "libxslt/": "libxslt1-dev", "zlib.h": "zlib1g-dev", "jpeglib.h": "libjpeg-dev", "yaml.h": "libyaml-dev",
    "sqlite3.h": "libsqlite3-dev", "bzlib.h": "libbz2-dev", "lzma.h": "liblzma-dev", "pg_config": "libpq-dev",
    "libpq-fe.h": "libpq-dev", "mysql_config": "default-libmysqlclient-dev", "krb5": "libkrb5-dev",
}
_MISSING_HEADER = re.compile(r"fatal error: ([\w./+-]+): No such file or directory|"
                             r"(pg_config|mysql_config) executable not found|(\w+_config): not found")


def build_packages_needed(log: str) -> list[str]:
    """The Debian packages a failed source build in ``log`` asks for: a compiler (with Python's
    headers) when there was none, and the package of each missing header that
    :data:`_HEADER_PACKAGES` knows. Empty when the log shows neither."""
    text = plain_log(log)
    needed = list(COMPILER_PACKAGES) if _NO_COMPILER.search(text) else []
    if _NO_RUST.search(text):
        needed.append("cargo")
    for match in _MISSING_HEADER.finditer(text):
        missing = next(group for group in match.groups() if group)
        needed.extend(package for header, package in _HEADER_PACKAGES.items()
                      if missing == header or missing.startswith(header))
    return list(dict.fromkeys(needed))
_FILTERED_OUT = re.compile(r"`([A-Za-z0-9_.-]+)` was filtered by `exclude-newer` to only include packages uploaded before "
                           r"\S+\. The latest version satisfying the requirement is \S+, published at (\d{4}-\d{2}-\d{2})")


def releases_gone_before_pin(log: str) -> dict[str, str]:
    """Packages the date pin left with no release at all (uv: "`atomicwrites` was filtered by
    `exclude-newer` ... The latest version satisfying the requirement is v1.4.1, published at
    2022-07-08"): name -> the day after the release uv names. The index no longer serves the
    releases of the pin's time (atomicwrites' before 2022 are gone), so the pin may let that one
    package reach a release that exists, and keep every other package at the commit's date."""
    text = plain_log(log)
    text = re.sub(r"\s+", " ", text)
    found: dict[str, str] = {}
    for name, day in _FILTERED_OUT.findall(text):
        following = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
        found[name.lower()] = max(found.get(name.lower(), following), following)
    return found


_OLD_SETUPTOOLS_NEEDED = re.compile(r"cannot import name '?Feature'?|use_2to3 is invalid|"
                                    r"error in \S+ setup command: use_2to3|module 'setuptools' has no attribute 'Feature'")


def old_setuptools_needed(log: str) -> bool:
    """Whether a dependency's sdist failed to build for want of an old setuptools (``Feature``, gone
    in 46; ``use_2to3``, gone in 58): the setuptools an editable install's back-end needs (PEP 660,
    64+) is too new for the dependencies built beside it."""
    return bool(_OLD_SETUPTOOLS_NEEDED.search(plain_log(log)))


_NEEDS_PYTHON = re.compile(r"Python\s*(>=?|~=|==|<=?)\s*(3\.\d+)")


def install_failure_reason(log: str, python: str, pin: str | None) -> str | None:
    """A one-line reason for a failed env install, read from uv's error in the build ``log``; None
    when the log shows no uv error this recognises.

    Says when a date-pinned dependency has no wheel for ``python`` (uv then builds it from source,
    and that fails: often for want of a compiler), when the resolver finds no release before the
    date pin, or when the releases of the day need another Python.
    """
    text = plain_log(log)
    as_of = f" as of {pin}" if pin else ""
    packages = build_packages_needed(log)
    if _NO_COMPILER.search(text) or _NO_RUST.search(text):
        compiler = f" ({MISSING_COMPILER}: add {', '.join(packages)} to system_packages)"
    elif packages:
        compiler = f" (missing headers: add {', '.join(packages)} to system_packages)"
    else:
        compiler = ""
    if match := _FAILED_BUILD.search(text):
        name, version = match.groups()
        return (f"{name} {version}{as_of} has no wheel for Python {python}, and building it from source "
                f"failed{compiler}")
    if match := _PROJECT_BUILD.search(text):
        cause = _first_cause(text, match.end())
        name = f" {match.group(1)}" if match.group(1) else ""
        return f"building the project{name} failed{compiler}{': ' + cause if cause else ''}"
    if "No solution found when resolving" in text:
        cause = _first_cause(text, text.index("No solution found when resolving"))
        filtered = re.search(r"`([A-Za-z0-9_.-]+)` was filtered by `exclude-newer`", text)
        if filtered:
            return f"{filtered.group(1)} has no release{as_of} that fits: {cause}"
        needs = _NEEDS_PYTHON.search(cause or "")
        if needs and "Python" in (cause or ""):
            return f"dependencies{as_of} do not support Python {python}: {cause}"
        return f"no dependency versions{as_of} fit together: {cause}"
    return None


def _first_cause(text: str, start: int) -> str:
    """The last ``cause:`` line of uv's error after ``start`` (the innermost), shortened."""
    causes = re.findall(r"^\s*cause: (.+)$", text[start:start + 20_000], flags=re.MULTILINE)
    cause = causes[-1] if causes else ""
    cause = re.sub(r",? we can conclude that .*$", "", cause).removeprefix("Because ")
    return cause.strip()[:240]
