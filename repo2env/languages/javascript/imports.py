"""The packages a JavaScript or TypeScript file reaches by name, read with tree-sitter: what the
own-code check needs to know which of the project's package names its tests resolve through
``node_modules`` (a test that imports the project by a relative path runs its files by construction).

A file reaches a package by name through a bare specifier (``chalk``, ``chalk/sub``,
``@scope/pkg/sub``) of an ``import``/``export ... from`` statement, TypeScript's ``import x =
require()``, or a call of ``require``, ``require.resolve``, ``import()`` or a test runner's module
loader (``jest.requireActual``, ``vi.importActual``, ``jest.mock``...). Relative and absolute paths,
``node:`` and other URL schemes, and ``#`` subpath imports are no package names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from repo2env.languages.javascript.syntax import parser

#: The member calls of test runners that load (or stand in for) a module named by their first argument.
_LOADER_METHODS = frozenset({"requireActual", "requireMock", "importActual", "importMock",
                             "mock", "doMock", "unmock"})
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def package_name(specifier: str) -> str | None:
    """The package a module specifier names (``chalk/sub`` -> ``chalk``, ``@a/b/c`` -> ``@a/b``);
    None for a relative or absolute path, a URL (``node:fs``) or a ``#`` subpath import."""
    if not specifier or specifier.startswith((".", "/", "#")) or _SCHEME.match(specifier):
        return None
    parts = specifier.split("/")
    if specifier.startswith("@"):
        return "/".join(parts[:2]) if len(parts) > 1 and parts[1] else None
    return parts[0]


def imported_packages(text: str, suffix: str, *, among: Iterable[str] = ()) -> frozenset[str]:
    """The package names ``text`` (a file ending in ``suffix``: ``.js``, ``.ts`` ...) imports or
    requires by name. A file the grammar cannot read without an error (Flow types, a hunk of a
    diff) may hide a specifier from the tree, so the names of ``among`` that appear there as the
    start of a quoted string count as imported too: the caller then checks them rather than miss one."""
    root = parser(suffix).parse(text.encode("utf-8")).root_node
    names = {name for specifier in _specifiers(root) if (name := package_name(specifier))}
    if root.has_error:
        names |= {name for name in among
                  if re.search(r"""['"`]""" + re.escape(name) + r"""(?:['"`/])""", text)}
    return frozenset(names)


def _specifiers(root) -> Iterable[str]:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in ("import_statement", "export_statement", "import_require_clause"):
            source = node.child_by_field_name("source")
            if source is not None and (value := _literal(source)) is not None:
                yield value
        elif node.type == "call_expression" and _loads_module(node.child_by_field_name("function")):
            arguments = node.child_by_field_name("arguments")
            first = arguments.named_children[0] if arguments is not None and arguments.named_children else None
            if first is not None and (value := _literal(first)) is not None:
                yield value
        stack.extend(node.children)


def _loads_module(function) -> bool:
    if function is None:
        return False
    if function.type == "import" or (function.type == "identifier" and function.text == b"require"):
        return True
    if function.type == "member_expression":
        owner, member = function.child_by_field_name("object"), function.child_by_field_name("property")
        method = member.text.decode("utf-8", "replace") if member is not None else ""
        return method in _LOADER_METHODS or (method == "resolve" and owner is not None and owner.text == b"require")
    return False


def _literal(node) -> str | None:
    """The value of a string literal, or of a template literal without substitutions."""
    if node.type not in ("string", "template_string") or any(child.type == "template_substitution"
                                                               for child in node.named_children):
        return None
    return node.text.decode("utf-8", "replace")[1:-1]
