"""The names a test file imports to declare tests and describe blocks, read with tree-sitter from
what a test patch shows of the file: where the grader's own canaries may call them (the runner
facts' ``test_callees``, for runners whose API is a module, as vitest's is unless its ``globals``
option is on).

Each hunk's side after the patch is parsed on its own; an ``import`` statement from the module
at its top level names them: ``import { describe, it, expect } from 'vitest'`` gives ``it`` and
``describe``, ``import { test as check } from 'vitest'`` gives ``check``, ``import * as vt from
'vitest'`` gives ``vt.it`` and ``vt.describe``. ``it`` is preferred to ``test`` where a file has
both (they are the same function). Type-only imports bind nothing that runs. A file whose
imports the patch does not show has no names here: the caller places nothing that needs them.
"""

from __future__ import annotations

from repo2env.languages.javascript.syntax import code_suffix, parser
from repo2env.languages.runner import TestCallees
from repo2env.patches import FilePatch

#: The module's exports a test is declared with, preferred first.
_TEST_EXPORTS = ("it", "test")


def imported_callees(file: FilePatch, module: str) -> TestCallees:
    """The names ``file``'s top level imports from ``module`` to declare a test and a describe
    block, as the patch shows the file after it ('' for each the patch shows none of)."""
    suffix = code_suffix(file.new_path or "")
    if suffix is None or file.is_deleted:
        return TestCallees(test="")
    bound: dict[str, str] = {}  # the module's export -> the file's name for it
    for hunk in file.hunks:
        text = "".join(line[1:].rstrip("\r\n") + "\n" for line in hunk.lines if line[:1] in ("+", " "))
        root = parser(suffix).parse(text.encode("utf-8")).root_node
        for statement in root.named_children:
            if _imports_from(statement, module):
                for export, local in _bindings(statement):
                    bound.setdefault(export, local)
    test = next((bound[name] for name in _TEST_EXPORTS if name in bound), "")
    return TestCallees(test=test, describe=bound.get("describe", ""))


def _imports_from(statement, module: str) -> bool:
    """Whether ``statement`` is a value import (not ``import type``) of ``module``, without errors."""
    if statement.type != "import_statement" or statement.has_error:
        return False
    if any(child.type == "type" for child in statement.children):
        return False
    source = statement.child_by_field_name("source")
    fragments = [child for child in source.named_children if child.type == "string_fragment"] if source else []
    return len(fragments) == 1 and fragments[0].text.decode("utf-8") == module


def _bindings(statement) -> list[tuple[str, str]]:
    """(export, local name) of each value an import statement binds: ``*`` for a namespace's
    exports gives ``(it, ns.it)``, ``(describe, ns.describe)``, ``(test, ns.test)``."""
    found = []
    for clause in (child for child in statement.named_children if child.type == "import_clause"):
        for part in clause.named_children:
            if part.type == "namespace_import":
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
