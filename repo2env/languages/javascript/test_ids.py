"""JavaScript test ids: ``<test file>::<describe titles and the test title joined by " > ">``.

``test/format.test.js::format > pads numbers`` is the test ``pads numbers`` in the ``describe``
block ``format`` of ``test/format.test.js`` (the path relative to the repository root, POSIX).
A file that fails to load (a syntax error, a missing import) is reported under the id of the file
alone: ``test/format.test.js``. Runners without describe blocks (ava, tape) give ``file::title``.

Escaping, so that an id splits back into exactly the titles it was made of:

- the file part ends at the first ``::``; a test file whose path holds ``::`` has no id
  (:func:`test_id` refuses it), so ``::`` inside titles needs no escape;
- inside a title, ``\\`` is written ``\\\\`` and every ``>`` that follows a space is written
  ``\\>``; so the separator ``" > "`` never occurs inside an escaped title, and a title such as
  ``a > b`` becomes ``a \\> b`` (``renders <div>`` and ``a->b`` stay as they are).

Ids are stable across runs: they depend on the file path and the titles only, never on an order,
a duration or an absolute path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

SEPARATOR = " > "
FILE_SEPARATOR = "::"
_SPACE_THEN_GT = re.compile(r"(?<= )>")


def escape_title(title: str) -> str:
    """One describe or test title as it appears inside an id."""
    return _SPACE_THEN_GT.sub(r"\\>", title.replace("\\", "\\\\"))


def test_id(file: str, titles: Sequence[str] = ()) -> str:
    """The id of the test ``titles`` (outermost describe first) in ``file``; the file's own id when
    ``titles`` is empty."""
    if FILE_SEPARATOR in file:
        raise ValueError(f"a test file path cannot hold '::': {file!r}")
    file = file.removeprefix("./")
    return file if not titles else f"{file}{FILE_SEPARATOR}{SEPARATOR.join(escape_title(title) for title in titles)}"


test_id.__test__ = False  # type: ignore[attr-defined]  # not a pytest test, despite the name


def split_test_id(test_id_text: str) -> tuple[str, tuple[str, ...]]:
    """``"f.js::a > b"`` -> ``("f.js", ("a", "b"))``; a file's own id gives no titles."""
    file, separator, rest = test_id_text.partition(FILE_SEPARATOR)
    if not separator:
        return file, ()
    titles: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(rest):
        char = rest[index]
        if char == "\\" and index + 1 < len(rest) and rest[index + 1] in "\\>":
            current.append(rest[index + 1])
            index += 2
        elif rest.startswith(SEPARATOR, index):
            titles.append("".join(current))
            current = []
            index += len(SEPARATOR)
        else:
            current.append(char)
            index += 1
    titles.append("".join(current))
    return file, tuple(titles)


def files_of(test_ids: Sequence[str]) -> list[str]:
    """The test files the ids name, in first-seen order."""
    return list(dict.fromkeys(split_test_id(one)[0] for one in test_ids))
