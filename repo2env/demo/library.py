"""textkit as it stands at its first commits: the files the demo history starts from.

textkit is a small, dependency-free text utility library (slugs, durations, byte sizes, wrapping,
tags, plain-text tables) with a pytest suite. Several functions carry the bugs that the demo PRs
of :mod:`repo2env.demo.history` fix, so those PRs' tests really fail before and pass after.
The code must run on Python 3.9 to 3.13: no ``match``, no ``X | Y`` evaluated at runtime.
"""

from __future__ import annotations

from repo2env.demo.spec import file_text

PYPROJECT = file_text("""
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "textkit"
version = "0.1.0"
description = "Small, dependency-free text utilities: slugs, durations, sizes, wrapping, tags, tables."
readme = "README.md"
requires-python = ">=3.9"
license = { text = "MIT" }
authors = [{ name = "Linus Maintainer", email = "maint@example.com" }]
dependencies = []

[project.optional-dependencies]
test = ["pytest"]

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
""")

GITIGNORE = file_text("""
__pycache__/
*.py[cod]
*.egg-info/
build/
dist/
.pytest_cache/
.venv/
""")

README = file_text("""
# textkit

Small, dependency-free text utilities for Python 3.9+.

```python
>>> from textkit import slugify, parse_duration, format_size
>>> slugify("Hello World")
'hello-world'
>>> parse_duration("1h30m")
5400
>>> format_size(1500)
'1.5 KB'
```

## Install

```
pip install textkit
```

## Develop

```
pip install -e ".[test]"
pytest
```
""")

CHANGELOG = file_text("""
# Changelog

All notable changes to textkit are listed here. The format follows Keep a Changelog.

## Unreleased

## 0.1.0 - 2024-01-08

### Added

- `slugify`, `parse_duration` and `format_duration`, `format_size` and `parse_size`, `wrap` and
  `truncate`, `parse_tags` and `format_tags`, `render_table`.
""")

PACKAGE_INIT = file_text('''
"""textkit: small, dependency-free text utilities.

Every public function is re-exported here, so ``from textkit import slugify`` works.
"""

from textkit.duration import format_duration, parse_duration
from textkit.sizes import format_size, parse_size
from textkit.slug import slugify
from textkit.table import render_table
from textkit.tags import format_tags, parse_tags
from textkit.wrap import truncate, wrap

__version__ = "0.1.0"

__all__ = [
    "format_duration",
    "format_size",
    "format_tags",
    "parse_duration",
    "parse_size",
    "parse_tags",
    "render_table",
    "slugify",
    "truncate",
    "wrap",
]
''')

SLUG = file_text(r'''
"""URL-safe slugs from arbitrary titles."""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

_UNSAFE = re.compile(r"[^a-z0-9]")


def slugify(text: str, separator: str = "-", max_length: Optional[int] = None) -> str:
    """Return a lowercase ASCII slug of ``text``.

    Accents are dropped ("Crème" becomes "creme") and every character that is not an ASCII
    letter or digit becomes ``separator``. ``max_length`` cuts the slug to that many characters.
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _UNSAFE.sub(separator, ascii_text.lower())
    if max_length is not None:
        slug = slug[:max_length]
    return slug
''')

DURATION = file_text(r'''
"""Human durations such as ``"1h30m"``: parse them to seconds and format seconds back."""

from __future__ import annotations

import re

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)\s*([dhms])")


def parse_duration(text: str) -> int:
    """Return the number of seconds ``text`` stands for.

    ``text`` is a sequence of ``<number><unit>`` parts, the units being ``d``, ``h``, ``m`` and
    ``s``: ``"1h30m"`` is 5400 and ``"2d 4h"`` is 187200. ``"0"`` is 0. Anything else raises
    ``ValueError``.
    """
    if text.strip() == "0":
        return 0
    parts = _PART.findall(text)
    if not parts:
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(amount) * _UNIT_SECONDS[unit] for amount, unit in parts)


def format_duration(seconds: int) -> str:
    """Return ``seconds`` in the compact form :func:`parse_duration` reads (3725 -> "1h2m5s")."""
    if seconds < 0:
        raise ValueError(f"negative duration: {seconds}")
    parts = []
    for unit, size in _UNIT_SECONDS.items():
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts) or "0s"
''')

SIZES = file_text(r'''
"""Byte counts for humans: ``1500`` is ``"1.5 KB"`` and ``"1.5 KiB"`` is ``1536``."""

from __future__ import annotations

import re

_DECIMAL_UNITS = ("B", "KB", "MB", "GB", "TB")
_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
_FACTORS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*", re.IGNORECASE)


def format_size(num_bytes: int, binary: bool = False) -> str:
    """Return ``num_bytes`` with one decimal in the largest unit that keeps it below 1000.

    With ``binary`` the units are KiB, MiB ... and the threshold is 1024: 1500 is "1.5 KB",
    1536 with ``binary`` is "1.5 KiB" and byte counts below one unit stay whole ("999 B").
    """
    base = 1024 if binary else 1000
    units = _BINARY_UNITS if binary else _DECIMAL_UNITS
    size = float(num_bytes)
    for unit in units:
        if abs(size) < base or unit == units[-1]:
            break
        size /= base
    if unit == "B":
        return f"{num_bytes} B"
    return f"{size:.1f} {unit}"


def parse_size(text: str) -> int:
    """Return the number of bytes in ``text`` such as ``"1.5 KB"``, ``"10MiB"`` or ``"512 b"``.

    Decimal units (KB, MB ...) are powers of 1000, binary ones (KiB, MiB ...) powers of 1024;
    units are case-insensitive. Anything else raises ``ValueError``.
    """
    match = _SIZE.fullmatch(text)
    if match is None or match.group(2).lower() not in _FACTORS:
        raise ValueError(f"not a size: {text!r}")
    number, unit = match.groups()
    return int(float(number) * _FACTORS[unit.lower()])
''')

WRAP = file_text(r'''
"""Fit text into a width: greedy word wrapping and truncation with an ellipsis."""

from __future__ import annotations

from typing import List


def wrap(text: str, width: int = 70) -> List[str]:
    """Return the lines of ``text`` re-flowed to at most ``width`` characters.

    Lines break between words; a word longer than ``width`` gets a line of its own.
    """
    lines: List[str] = []
    current = ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        lines.append(current)
    return lines


def truncate(text: str, width: int, ellipsis: str = "...") -> str:
    """Return ``text`` if it fits in ``width`` characters, else its start followed by ``ellipsis``."""
    if len(text) <= width:
        return text
    return text[: width - len(ellipsis)] + ellipsis
''')

TAGS = file_text(r'''
"""Tag lists such as ``"python, cli, text"``: parse them and format them back."""

from __future__ import annotations

from typing import Iterable, List


def parse_tags(text: str, separator: str = ",") -> List[str]:
    """Return the tags in ``text``: split on ``separator``, stripped and lower-cased.

    Empty tags are dropped and duplicates are kept once, in first-seen order.
    """
    tags: List[str] = []
    for raw in text.split(separator):
        tag = raw.strip().lower()
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def format_tags(tags: Iterable[str]) -> str:
    """Return ``tags`` as a ``"#a, #b"`` line."""
    return ", ".join(f"#{tag}" for tag in tags)
''')

TABLE = file_text(r'''
"""Plain-text tables: rows of cells rendered as aligned columns."""

from __future__ import annotations

from typing import Sequence


def render_table(rows: Sequence[Sequence[str]], header: bool = True) -> str:
    """Return ``rows`` as left-aligned columns separated by two spaces.

    With ``header`` the first row is underlined with dashes. All rows must have the same length.
    """
    if not rows:
        return ""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if header and index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)
''')

CONFTEST = file_text(r'''
"""Fixtures shared by textkit's tests."""

import pytest


@pytest.fixture
def people_rows():
    """A small header-first table, as :func:`textkit.render_table` takes it."""
    return [["name", "born"], ["Ada Lovelace", "1815"], ["Grace Hopper", "1906"]]
''')

TEST_SLUG = file_text(r"""
from textkit import slugify


def test_lowercases_words():
    assert slugify("Hello World") == "hello-world"


def test_drops_accents():
    assert slugify("Crème Brûlée") == "creme-brulee"


def test_custom_separator():
    assert slugify("Hello World", separator="_") == "hello_world"


def test_max_length():
    assert slugify("abcdef", max_length=3) == "abc"
""")

TEST_DURATION = file_text(r"""
import pytest

from textkit import format_duration, parse_duration


@pytest.mark.parametrize("text, seconds", [("45s", 45), ("2m", 120), ("3h", 10800), ("1d", 86400)])
def test_parses_single_units(text, seconds):
    assert parse_duration(text) == seconds


def test_parses_compound_durations():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("2d 4h") == 187200


def test_parses_zero():
    assert parse_duration("0") == 0


def test_rejects_text_without_numbers():
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_formats_compound_durations():
    assert format_duration(3725) == "1h2m5s"


def test_formats_zero():
    assert format_duration(0) == "0s"


def test_round_trip():
    for seconds in (59, 61, 3600, 90061):
        assert parse_duration(format_duration(seconds)) == seconds
""")

TEST_SIZES = file_text(r"""
import pytest

from textkit import format_size, parse_size


def test_formats_bytes():
    assert format_size(512) == "512 B"


def test_formats_decimal_units():
    assert format_size(1500) == "1.5 KB"
    assert format_size(2_500_000) == "2.5 MB"


def test_formats_binary_units():
    assert format_size(1536, binary=True) == "1.5 KiB"


def test_parses_sizes():
    assert parse_size("1.5 KB") == 1500
    assert parse_size("10MiB") == 10 * 1024**2
    assert parse_size("512 b") == 512


def test_rejects_unknown_units():
    with pytest.raises(ValueError):
        parse_size("12 parsecs")
""")

TEST_TAGS = file_text(r"""
from textkit import format_tags, parse_tags


def test_splits_and_strips():
    assert parse_tags(" a, b ,c") == ["a", "b", "c"]


def test_drops_empty_and_duplicate_tags():
    assert parse_tags("a,, A ,a") == ["a"]


def test_custom_separator():
    assert parse_tags("x;y", separator=";") == ["x", "y"]


def test_formats_tags():
    assert format_tags(["a", "b"]) == "#a, #b"
""")

TEST_TABLE = file_text(r"""
from textkit import table


def test_renders_aligned_columns(people_rows):
    assert table.render_table(people_rows) == (
        "name          born\n"
        "------------  ----\n"
        "Ada Lovelace  1815\n"
        "Grace Hopper  1906"
    )


def test_renders_without_header(people_rows):
    assert table.render_table(people_rows, header=False).splitlines() == [
        "name          born",
        "Ada Lovelace  1815",
        "Grace Hopper  1906",
    ]


def test_empty_table():
    assert table.render_table([]) == ""
""")

USAGE_DOCS = file_text(r"""
# Using textkit

## Slugs

```python
>>> slugify("Crème Brûlée")
'creme-brulee'
>>> slugify("Hello World", separator="_")
'hello_world'
```

## Durations

`parse_duration` turns a human duration into seconds, `format_duration` goes back:

```python
>>> parse_duration("1h30m")
5400
>>> parse_duration("1:30")
5400
>>> format_duration(3725)
'1h2m5s'
```

## Sizes

```python
>>> format_size(1500)
'1.5 KB'
>>> parse_size("1.5 KiB")
1536
```

## Wrapping and truncating

```python
>>> wrap("the quick brown fox", width=10)
['the quick', 'brown fox']
>>> truncate("hello world", 8)
'hello...'
```

## Tags and tables

```python
>>> parse_tags("python, cli")
['python', 'cli']
>>> print(render_table([["name", "born"], ["Ada Lovelace", "1815"]]))
name          born
------------  ----
Ada Lovelace  1815
```
""")

#: The tree of textkit's first commit, path -> content.
INITIAL_FILES: dict[str, str] = {
    ".gitignore": GITIGNORE,
    "CHANGELOG.md": CHANGELOG,
    "README.md": README,
    "pyproject.toml": PYPROJECT,
    "src/textkit/__init__.py": PACKAGE_INIT,
    "src/textkit/duration.py": DURATION,
    "src/textkit/sizes.py": SIZES,
    "src/textkit/slug.py": SLUG,
    "src/textkit/table.py": TABLE,
    "src/textkit/tags.py": TAGS,
    "src/textkit/wrap.py": WRAP,
    "tests/conftest.py": CONFTEST,
    "tests/test_duration.py": TEST_DURATION,
    "tests/test_sizes.py": TEST_SIZES,
    "tests/test_slug.py": TEST_SLUG,
    "tests/test_table.py": TEST_TABLE,
    "tests/test_tags.py": TEST_TAGS,
}
