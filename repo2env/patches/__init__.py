"""The one patch model: a git-format diff read the way ``git apply`` reads it, and written back exactly.

:func:`parse` cuts a diff into :class:`FilePatch` objects (header lines, :class:`Hunk` objects, a
binary block) and :func:`render` joins them again: ``render(parse(text)) == text`` for any diff
``parse`` accepts, byte for byte (CRLF line ends, a last line without ``\\n``, text before the first
file and between files included).

Why not :mod:`unidiff`'s ``PatchSet``: what matters here is that every stage, above all the
grader's filter, sees the files that ``git apply`` will write, and unidiff reads a diff otherwise.
It takes file names from the ``diff --git`` line where git takes them from ``---``/``+++``, ``rename
to`` or ``copy to`` (``diff --git a/x.py b/x.py`` with ``+++ b/tests/test_x.py`` writes the test
file), it does not undo git's C-quoting (``"b/conftes\\164.py"`` is ``conftest.py`` to git), it
leaves a ``GIT binary patch``'s data lines to whatever follows, and it reads lines git skips as
garbage. So the reading below follows git's ``apply.c`` (``find_header``,
``parse_git_diff_header``, ``parse_fragment``, ``parse_binary``) rule for rule, and a diff git
would refuse raises :class:`~repo2env.errors.PatchError` here too. Where git's reading of a name
depends on details this module does not copy (a timestamp after a traditional ``---`` name),
:attr:`FilePatch.names` lists every name the line could give, so a check over them is never
narrower than git.

Everything here is pure: text in, objects or text out. Four modules, one reason to change each:
:mod:`~repo2env.patches.model` (what a patch is to the stages: files, hunks, their rendering),
:mod:`~repo2env.patches.reader` (how ``git apply`` cuts a diff into files, hunks and binary blocks),
:mod:`~repo2env.patches.names` (how ``git apply`` reads a file's name from a header line) and
:mod:`~repo2env.patches.apply` (a file's text after its hunks, without a work tree).
"""

from repo2env.patches.apply import apply_to_text, patched_text
from repo2env.patches.model import (
    DEV_NULL,
    SUBMODULE_MODE,
    SYMLINK_MODE,
    FilePatch,
    Hunk,
    Patch,
    relative_symlink_target,
    render,
)
from repo2env.patches.reader import hunk_count, parse, parse_readable

__all__ = ["DEV_NULL", "SUBMODULE_MODE", "SYMLINK_MODE", "FilePatch", "Hunk", "Patch", "apply_to_text", "hunk_count", "parse", "parse_readable", "patched_text",
           "relative_symlink_target", "render"]
