"""The JavaScript profile's variants of a gold patch: partial fixes (every language's) and stubs of
the functions the fix changed, found in tree-sitter's syntax tree of each changed file
(``tree-sitter-javascript``; ``tree-sitter-typescript`` for ``.ts``/``.tsx``).

A stub applies the whole fix, then gives every outermost function it changed (touched a line of, or
created: declarations, function expressions, arrow functions, methods) a one-statement body:
``stub-undefined`` returns ``undefined``, ``stub-array`` ``[]``, ``stub-zero`` ``0``, ``stub-string``
``""`` and ``stub-throw`` throws. A constructor keeps ``return undefined;`` in every style but
``stub-throw`` (a constructor that returns an object replaces the instance). Near misses of
JavaScript are not made yet.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from functools import cache

from repo2env.languages.variants import Variant, VariantMaker, diff_files, text_lines

#: The body each stub style gives a function, in the order the styles are graded.
STUB_BODIES = {
    "undefined": "return undefined;",
    "array": "return [];",
    "zero": "return 0;",
    "string": 'return "";',
    "throw": 'throw new Error("not implemented");',
}
_FUNCTIONS = frozenset({"function_declaration", "generator_function_declaration", "function_expression", "function",
                        "generator_function", "arrow_function", "method_definition"})
_TYPESCRIPT = (".ts", ".mts", ".cts")
_SUFFIXES = (".js", ".cjs", ".mjs", ".jsx", *_TYPESCRIPT, ".tsx")


class JavaScriptVariants(VariantMaker):
    """Partial fixes, and stubs of the changed JavaScript/TypeScript files made with tree-sitter."""

    def stubs(self, before: Mapping[str, str], after: Mapping[str, str], *,
              limit: int = len(STUB_BODIES)) -> list[Variant]:
        return stubs(before, after, limit=limit)


@cache
def _parser(suffix: str):
    import tree_sitter

    if suffix in _TYPESCRIPT or suffix == ".tsx":
        import tree_sitter_typescript

        language = (tree_sitter_typescript.language_tsx() if suffix == ".tsx"
                    else tree_sitter_typescript.language_typescript())
    else:
        import tree_sitter_javascript

        language = tree_sitter_javascript.language()
    return tree_sitter.Parser(tree_sitter.Language(language))


def changed_functions(old: str | None, new: str, suffix: str) -> list[tuple[int, int, bool]]:
    """The outermost functions of ``new`` the change from ``old`` touched: (body start byte, body
    end byte, is a constructor), in the file's order; [] when ``new`` does not parse."""
    tree = _parser(suffix).parse(new.encode("utf-8"))
    if tree.root_node.has_error:
        return []
    changed: set[int] = set()
    if old is None:
        changed = set(range(new.count("\n") + 1))
    else:
        matcher = difflib.SequenceMatcher(None, text_lines(old), text_lines(new), autojunk=False)
        for tag, _, _, start, stop in matcher.get_opcodes():
            if tag != "equal":
                changed.update(range(start, max(stop, start + 1)))
    found: list[tuple[int, int, bool]] = []

    def visit(node) -> None:
        if node.type in _FUNCTIONS:
            body = node.child_by_field_name("body")
            rows = range(node.start_point[0], node.end_point[0] + 1)
            if body is not None and changed.intersection(rows):
                name = node.child_by_field_name("name")
                found.append((body.start_byte, body.end_byte, name is not None and name.text == b"constructor"))
                return
        for child in node.children:
            visit(child)

    visit(tree.root_node)
    return found


def stubs(before: Mapping[str, str], after: Mapping[str, str], *, limit: int = len(STUB_BODIES)) -> list[Variant]:
    """Up to ``limit`` stub variants of the fix, one per style of :data:`STUB_BODIES` in its order
    (module docstring); a variant equal to the gold patch or to another is left out."""
    if limit <= 0:
        return []
    paths = sorted(set(before) | set(after))
    targets = {}
    for path in paths:
        old, new = before.get(path), after.get(path)
        if new is None or old == new or not path.endswith(_SUFFIXES):
            continue
        found = changed_functions(old, new, "." + path.rsplit(".", 1)[-1])
        if found:
            targets[path] = found
    if not targets:
        return []
    seen = {diff_files(paths, before, after)}
    variants: list[Variant] = []
    for style, body in STUB_BODIES.items():
        if len(variants) == limit:
            break
        stubbed = {}
        for path, spans in targets.items():
            data = after[path].encode("utf-8")
            for start, end, constructor in reversed(spans):
                statement = STUB_BODIES["undefined"] if constructor and style != "throw" else body
                data = data[:start] + f"{{ {statement} }}".encode() + data[end:]
            stubbed[path] = data.decode("utf-8")
        patch = diff_files(paths, before, {**after, **stubbed})
        if patch in seen:
            continue
        seen.add(patch)
        count = sum(len(spans) for spans in targets.values())
        variants.append(Variant(kind="stub", name=f"stub-{style}", patch=patch,
                                description=f"the fix with its {count} changed function(s) reduced to `{body}`"))
    return variants
