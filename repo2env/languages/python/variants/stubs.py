"""Stubs: the whole fix with the body of every function it changed reduced to one trivial statement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from repo2env.languages.python.variants.base import (
    MUTABLE_SUFFIX,
    ChangedLines,
    Variant,
    diff_files,
    syntax_tree,
)

StubStyle = Literal["none", "list", "zero", "str", "raise"]

#: The body each stub style gives a function, in the order the styles are graded.
STUB_BODIES: dict[StubStyle, str] = {
    "none": "return None",
    "list": "return []",
    "zero": "return 0",
    "str": 'return ""',
    "raise": "raise NotImplementedError",
}


#: Methods Python requires to return ``None``: a value stub gives them ``return None`` instead, or
#: every object would fail to build and the stub would measure that, not the tests.
_RETURN_NONE_METHODS = frozenset({"__init__", "__post_init__", "__init_subclass__", "__set_name__", "__setattr__",
                                  "__delattr__", "__set__", "__delete__", "__setitem__", "__delitem__"})


def stubs(before: Mapping[str, str], after: Mapping[str, str], *, limit: int = len(STUB_BODIES)) -> list[Variant]:
    """Up to ``limit`` stub variants of the fix, one per style of :data:`STUB_BODIES` in its order.

    ``before`` and ``after`` are as for :func:`near_misses`. A stub variant applies the whole fix,
    then replaces the body of every function the fix changed (touched a line of, or created) in a
    ``.py`` file by one statement: ``stub-none`` returns ``None``, ``stub-list`` ``[]``,
    ``stub-zero`` ``0``, ``stub-str`` ``""`` and ``stub-raise`` raises ``NotImplementedError``. The
    stubs are made on the fixed version so that functions the fix adds exist with the fix's
    signatures: a stub that scores above the empty patch means tests that pass on a function
    which does nothing. Docstrings stay; a function nested in a changed one goes with its body;
    ``__init__`` and the other methods that must return ``None`` return ``None`` in every style
    but ``stub-raise``.
    A variant whose patch equals the gold patch or another variant's is left out; without a
    changed function the result is ``[]``.
    """
    if limit <= 0:
        return []
    paths = sorted(set(before) | set(after))
    changed_functions: dict[str, tuple[cst.Module, frozenset[cst.FunctionDef]]] = {}
    for path in paths:
        old, new = before.get(path), after.get(path)
        if new is None or old == new or not path.endswith(MUTABLE_SUFFIX) or syntax_tree(new) is None:
            continue
        try:
            wrapper = MetadataWrapper(cst.parse_module(new), unsafe_skip_copy=True)
        except cst.ParserSyntaxError:
            continue
        changed = ChangedLines.between(old or "", new)
        targets = _outermost_changed_functions(wrapper.resolve(PositionProvider), changed)
        if targets:
            changed_functions[path] = (wrapper.module, targets)
    if not changed_functions:
        return []
    gold = diff_files(paths, before, after)
    seen = {gold}
    variants: list[Variant] = []
    for style, body in STUB_BODIES.items():
        if len(variants) == limit:
            break
        stubbed = {path: module.visit(_BodyStubber(targets, body)).code
                   for path, (module, targets) in changed_functions.items()}
        patch = diff_files(paths, before, {**after, **stubbed})
        if patch in seen:
            continue
        seen.add(patch)
        count = sum(len(targets) for _, targets in changed_functions.values())
        variants.append(Variant(kind="stub", name=f"stub-{style}", patch=patch,
                                description=f"the fix with the {count} function(s) it changed reduced to `{body}`"))
    return variants


def _outermost_changed_functions(positions: Mapping[cst.CSTNode, CodeRange],
                                 changed: ChangedLines) -> frozenset[cst.FunctionDef]:
    """The functions whose lines the fix touched, leaving out those nested in another such one."""
    touched = [(span, node) for node, span in positions.items()
               if isinstance(node, cst.FunctionDef) and changed.touch(span)]
    return frozenset(
        node for span, node in touched
        if not any(other is not node and other_span.start.line <= span.start.line and span.end.line <= other_span.end.line
                   for other_span, other in touched)
    )


class _BodyStubber(cst.CSTTransformer):
    """Replaces the body of the ``targets`` (functions of the module visited) by ``body``, after
    the docstring when there is one."""

    def __init__(self, targets: frozenset[cst.FunctionDef], body: str) -> None:
        super().__init__()
        self.targets = targets
        self.statement = cst.parse_statement(body)
        self.returns_none = cst.parse_statement("return None") if body.startswith("return") else self.statement

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if original_node not in self.targets:
            return updated_node
        body: list[cst.BaseStatement] = []
        docstring = original_node.get_docstring(clean=False)
        first = original_node.body.body[0] if isinstance(original_node.body, cst.IndentedBlock) else None
        if docstring is not None and first is not None:
            body.append(first)
        body.append(self.returns_none if original_node.name.value in _RETURN_NONE_METHODS else self.statement)
        return updated_node.with_changes(body=cst.IndentedBlock(body=body))
