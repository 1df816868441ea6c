"""The names a test file imports to declare tests and describe blocks, read with tree-sitter from
what a test patch shows of the file: where the grader's own canaries may call them (the runner
facts' ``test_callees``, for runners whose API is a module: vitest's unless its ``globals`` option
is on, ava's, tape's and ``node --test``'s).

Each hunk's side after the patch is parsed on its own; an ``import`` statement from one of the
runner's modules at its top level names them: ``import { describe, it, expect } from 'vitest'``
gives ``it`` and ``describe``, ``import { test as check } from 'vitest'`` gives ``check``,
``import * as vt from 'vitest'`` gives ``vt.it`` and ``vt.describe``. So does a top-level
``require``: ``const { test, describe } = require('node:test')``. The modules whose default export
is the test function (ava, tape, ``node:test``) name it by any local name: ``import test from
'ava'``, ``const check = require('tape')``. ``it`` is preferred to ``test`` where a file has both
(they are the same function). Type-only imports bind nothing that runs.

:func:`imported_callees` reads what a patch shows of a file (its hunks: a file whose imports lie
outside them has no names there); :func:`file_callees` reads a whole file, as the build reads each
hidden test file the way a grading restores it (the image's snapshot with the test patch applied),
so that a PR that only changes tests below the file's ``import test from 'ava'`` still names it.
"""

from __future__ import annotations

from collections.abc import Sequence

from repo2env.languages.javascript.syntax import code_suffix, parser
from repo2env.models import FileCallees
from repo2env.patches import FilePatch

#: The module's exports a test is declared with, preferred first.
_TEST_EXPORTS = ("it", "test")
#: Modules whose default export (or ``module.exports``) is the test function itself.
DEFAULT_IS_TEST = frozenset({"ava", "tape", "node:test"})


def imported_callees(file: FilePatch, module: str | Sequence[str]) -> FileCallees:
    """The names ``file``'s top level imports (or requires) from ``module`` (or any of several) to
    declare a test and a describe block, as the patch shows the file after it ('' for each the
    patch shows none of)."""
    modules = (module,) if isinstance(module, str) else tuple(module)
    suffix = code_suffix(file.new_path or "")
    if suffix is None or file.is_deleted:
        return FileCallees(test="")
    bound: dict[str, str] = {}  # the module's export -> the file's name for it
    for hunk in file.hunks:
        text = "".join(line[1:].rstrip("\r\n") + "\n" for line in hunk.lines if line[:1] in ("+", " "))
        _bind(text, suffix, modules, bound)
    return _callees(bound)


def file_callees(text: str, path: str, module: str | Sequence[str]) -> FileCallees:
    """The names the top level of ``text`` (the whole of the file ``path``) imports (or requires)
    from ``module`` (or any of several) to declare a test and a describe block ('' for each it has
    none of, and for both when ``path`` is no JavaScript or TypeScript file)."""
    modules = (module,) if isinstance(module, str) else tuple(module)
    suffix = code_suffix(path)
    if suffix is None:
        return FileCallees(test="")
    bound: dict[str, str] = {}
    _bind(text, suffix, modules, bound)
    return _callees(bound)


def _bind(text: str, suffix: str, modules: tuple[str, ...], bound: dict[str, str]) -> None:
    """Add to ``bound`` (export -> local name, the first binding of each kept) what the top level
    of ``text`` imports or requires from ``modules``."""
    root = parser(suffix).parse(text.encode("utf-8")).root_node
    for statement in root.named_children:
        for export, local in [*_import_bindings(statement, modules), *_require_bindings(statement, modules)]:
            bound.setdefault(export, local)


def _callees(bound: dict[str, str]) -> FileCallees:
    test = next((bound[name] for name in _TEST_EXPORTS if name in bound), "")
    return FileCallees(test=test, describe=bound.get("describe", ""))


def _module_name(string_node) -> str | None:
    """The value of a plain string literal (a module specifier), else None."""
    if string_node is None or string_node.type != "string":
        return None
    fragments = [child for child in string_node.named_children if child.type == "string_fragment"]
    return fragments[0].text.decode("utf-8") if len(fragments) == 1 and len(string_node.named_children) == 1 else None


def _import_bindings(statement, modules: tuple[str, ...]) -> list[tuple[str, str]]:
    """(export, local name) of each value ``statement`` binds when it is a value import (not
    ``import type``) of one of ``modules``, without errors: ``*`` for a namespace's exports gives
    ``(it, ns.it)``, ``(describe, ns.describe)``, ``(test, ns.test)``; a default import of a module
    of :data:`DEFAULT_IS_TEST` gives ``(test, local)``."""
    if statement.type != "import_statement" or statement.has_error:
        return []
    if any(child.type == "type" for child in statement.children):
        return []
    module = _module_name(statement.child_by_field_name("source"))
    if module not in modules:
        return []
    found = []
    for clause in (child for child in statement.named_children if child.type == "import_clause"):
        for part in clause.named_children:
            if part.type == "identifier" and module in DEFAULT_IS_TEST:
                found.append(("test", part.text.decode("utf-8")))
            elif part.type == "namespace_import":
                names = [child for child in part.named_children if child.type == "identifier"]
                if names:
                    local = names[-1].text.decode("utf-8")
                    found.extend((export, f"{local}.{export}") for export in (*_TEST_EXPORTS, "describe"))
            elif part.type == "named_imports":
                for specifier in part.named_children:
                    if specifier.type != "import_specifier" or any(child.type == "type" for child in specifier.children):
                        continue
                    names = [child for child in specifier.named_children if child.type == "identifier"]
                    if names:
                        found.append((names[0].text.decode("utf-8"), names[-1].text.decode("utf-8")))
    return found


def _require_bindings(statement, modules: tuple[str, ...]) -> list[tuple[str, str]]:
    """(export, local name) of each name a top-level ``const|let|var NAME = require(MODULE)`` of one
    of ``modules`` binds: the test function for a module of :data:`DEFAULT_IS_TEST`, and each
    property of a destructuring ``{ test, it: check, describe }``."""
    if statement.type not in ("lexical_declaration", "variable_declaration") or statement.has_error:
        return []
    found = []
    for declarator in (child for child in statement.named_children if child.type == "variable_declarator"):
        name, value = declarator.child_by_field_name("name"), declarator.child_by_field_name("value")
        if value is None or value.type != "call_expression":
            continue
        callee, arguments = value.child_by_field_name("function"), value.child_by_field_name("arguments")
        if callee is None or callee.type != "identifier" or callee.text.decode("utf-8") != "require" \
                or arguments is None or len(arguments.named_children) != 1:
            continue
        module = _module_name(arguments.named_children[0])
        if module not in modules:
            continue
        if name.type == "identifier":
            if module in DEFAULT_IS_TEST:
                found.append(("test", name.text.decode("utf-8")))
        elif name.type == "object_pattern":
            for part in name.named_children:
                if part.type == "shorthand_property_identifier_pattern":
                    found.append((part.text.decode("utf-8"), part.text.decode("utf-8")))
                elif part.type == "pair_pattern":
                    key, local = part.child_by_field_name("key"), part.child_by_field_name("value")
                    if key is not None and local is not None and local.type == "identifier":
                        found.append((key.text.decode("utf-8").strip("'\""), local.text.decode("utf-8")))
    return found
