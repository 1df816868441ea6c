"""The JavaScript profile's variants of a gold patch: partial fixes (every language's), near misses
and stubs of the functions the fix changed, found in tree-sitter's syntax tree of each changed file
(``tree-sitter-javascript``; ``tree-sitter-typescript`` for ``.ts``/``.tsx``).

A stub applies the whole fix, then gives every outermost function it changed (touched a line of, or
created: declarations, function expressions, arrow functions, methods) a one-statement body:
``stub-undefined`` returns ``undefined``, ``stub-array`` ``[]``, ``stub-zero`` ``0``, ``stub-string``
``""`` and ``stub-throw`` throws. A constructor keeps ``return undefined;`` in every style but
``stub-throw`` (a constructor that returns an object replaces the instance).

A near miss (:func:`near_misses`) applies the whole fix and breaks it in one place, named as the
Python profile names its own: ``undo-statement-N`` (one changed stretch of lines back to its form
before the fix), ``flip-compare-N`` (one comparison negated), ``alter-return-N`` (one returned value
changed).
"""

from __future__ import annotations

import difflib
import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass

from repo2env.languages.javascript.syntax import CODE_SUFFIXES, code_suffix, parser
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


class JavaScriptVariants(VariantMaker):
    """Partial fixes, and near misses and stubs of the changed JavaScript/TypeScript files made with
    tree-sitter."""

    def near_misses(self, before: Mapping[str, str], after: Mapping[str, str], *, limit: int = 6) -> list[Variant]:
        return near_misses(before, after, limit=limit)

    def stubs(self, before: Mapping[str, str], after: Mapping[str, str], *,
              limit: int = len(STUB_BODIES)) -> list[Variant]:
        return stubs(before, after, limit=limit)


def changed_functions(old: str | None, new: str, suffix: str) -> list[tuple[int, int, bool]]:
    """The outermost functions of ``new`` the change from ``old`` touched: (body start byte, body
    end byte, is a constructor), in the file's order; [] when ``new`` does not parse."""
    tree = parser(suffix).parse(new.encode("utf-8"))
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
        if new is None or old == new or not path.endswith(CODE_SUFFIXES):
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


# --- near misses ---------------------------------------------------------------------------

#: Round-robin order of the near-miss kinds (the Python profile's names).
MUTATION_KINDS = ("undo-statement", "flip-compare", "alter-return")
#: Each comparison operator and its negation.
FLIPPED_OPERATORS = {"===": "!==", "!==": "===", "==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
_LOGICAL_OPERATORS = frozenset({"&&", "||"})
_SNIPPET_CHARS = 60


@dataclass(frozen=True)
class _Site:
    """One place where one file can be mutated: its kind, its number among its kind's sites (path
    then source order), the file, what it breaks and the mutated text of the file."""

    kind: str
    number: int
    path: str
    description: str
    text: str


def near_misses(before: Mapping[str, str], after: Mapping[str, str], *, limit: int = 6,
                seed: int = 0) -> list[Variant]:
    """Up to ``limit`` variants of the fix, each broken in one place of code it changed.

    ``before`` and ``after`` are as for the Python profile's near misses (a file the fix creates is
    absent from ``before``). Each variant's patch turns ``before`` into ``after`` except for one
    JavaScript/TypeScript file (declaration files aside: they never run), mutated once:

    - ``undo-statement-N``: one stretch of lines the fix changed goes back to its form before the
      fix (lines it added dropped, lines it removed put back);
    - ``flip-compare-N``: one comparison on a changed line of a function the fix changed is negated
      (``===``/``!==``, ``==``/``!=``, ``<``/``>=``, ``>``/``<=``);
    - ``alter-return-N``: one value returned on such a line (a ``return``, an arrow function's
      expression body) changes: ``true``/``false`` swap, a number n becomes n + 1, a string becomes
      ``""`` (an empty one ``undefined``), a comparison or a logical expression is negated, ``null``
      and anything else become ``undefined``.

    Every mutated file parses without error (tree-sitter) and its tokens differ from both its
    ``after`` and its ``before`` form, so no variant is gold or the empty patch in disguise; no two
    variants have the same patch. N numbers the faithful sites of a kind in path then source order,
    so a name means the same mutation whatever the ``limit``. Kinds take turns (undo, flip, alter,
    undo ...) until ``limit`` variants are found; a kind with more sites than turns gives a sample
    drawn with ``random.Random(seed)``; the result comes round-robin, each kind in N order.
    """
    if limit <= 0:
        return []
    paths = sorted(set(before) | set(after))
    sites: dict[str, list[_Site]] = {kind: [] for kind in MUTATION_KINDS}
    for path in paths:
        old, new = before.get(path), after.get(path)
        # Declaration files never run: a mutated one would score like gold.
        if new is None or old == new or code_suffix(path) is None:
            continue
        for kind, description, text in _file_sites(path, old or "", new):
            sites[kind].append(_Site(kind, len(sites[kind]) + 1, path, description, text))
    rng = random.Random(seed)
    queues = {kind: list(found) for kind, found in sites.items()}
    for queue in queues.values():
        rng.shuffle(queue)  # popped from the end: a random sample, drawn only as far as needed
    chosen: dict[str, list[tuple[_Site, str]]] = {kind: [] for kind in MUTATION_KINDS}
    seen = {diff_files(paths, before, after)}
    count = 0
    while count < limit and any(queues.values()):
        for kind in MUTATION_KINDS:
            while count < limit and queues[kind]:
                site = queues[kind].pop()
                patch = diff_files(paths, before, {**after, site.path: site.text})
                if patch not in seen:
                    seen.add(patch)
                    chosen[kind].append((site, patch))
                    count += 1
                    break
    ordered = [sorted(chosen[kind], key=lambda item: item[0].number) for kind in MUTATION_KINDS]
    variants: list[Variant] = []
    for row in itertools.zip_longest(*ordered):
        for site, patch in filter(None, row):
            variants.append(Variant(kind="near_miss", name=f"{site.kind}-{site.number}", patch=patch,
                                    description=site.description))
    return variants


def _file_sites(path: str, old: str, new: str) -> list[tuple[str, str, str]]:
    """Every faithful mutation of ``new`` (kind, description, mutated text), kind by kind in source
    order; [] when ``new`` does not parse."""
    suffix = "." + path.rsplit(".", 1)[-1]
    grammar = parser(suffix)
    tree = grammar.parse(new.encode("utf-8"))
    if tree.root_node.has_error:
        return []
    old_tree = grammar.parse(old.encode("utf-8"))
    forms = {_tokens(tree.root_node), None if old_tree.root_node.has_error else _tokens(old_tree.root_node)}

    def faithful(text: str) -> bool:
        mutated = grammar.parse(text.encode("utf-8")).root_node
        return not mutated.has_error and _tokens(mutated) not in forms

    data = new.encode("utf-8")
    rows = _changed_rows(old, new)
    functions = [(start, end) for start, end, _ in changed_functions(old or None, new, suffix)]
    found: list[tuple[str, str, str]] = []
    for description, text in _undone_stretches(path, old, new):
        if faithful(text):
            found.append(("undo-statement", description, text))
    for kind, node, replacement, description in _expression_sites(tree.root_node, rows, functions, path):
        text = (data[:node.start_byte] + replacement.encode("utf-8") + data[node.end_byte:]).decode("utf-8")
        if faithful(text):
            found.append((kind, description, text))
    return found


def _expression_sites(root, rows: set[int], functions: list[tuple[int, int]], path: str):
    """(kind, node to replace, replacement, description) of every comparison and returned value on
    a changed row inside a changed function, flips before alters, each in source order."""
    flips, alters = [], []

    def on_changed_code(node) -> bool:
        return (any(start <= node.start_byte and node.end_byte <= end for start, end in functions)
                and not rows.isdisjoint(range(node.start_point[0], node.end_point[0] + 1)))

    def visit(node) -> None:
        if node.type == "binary_expression" and on_changed_code(node):
            operator = node.child_by_field_name("operator")
            flipped = FLIPPED_OPERATORS.get(operator.type) if operator is not None else None
            if flipped is not None and operator.start_point[0] in rows:
                flips.append(("flip-compare", operator, flipped,
                              f"flip `{operator.type}` to `{flipped}` on line {operator.start_point[0] + 1} of {path}"))
        returned = None
        if node.type == "return_statement":
            returned = next((child for child in node.named_children if child.type != "comment"), None)
        elif node.type == "arrow_function":
            body = node.child_by_field_name("body")
            returned = body if body is not None and body.type != "statement_block" else None
        if returned is not None and on_changed_code(returned):
            altered = _altered_value(returned)
            if altered is not None:
                alters.append(("alter-return", returned, altered,
                               f"return `{altered}` instead of `{_snippet(returned)}` on line "
                               f"{returned.start_point[0] + 1} of {path}"))
        for child in node.children:
            visit(child)

    visit(root)
    return flips + alters


def _altered_value(node) -> str | None:
    """The code returned instead of ``node``; None when nothing sensible differs (``undefined``)."""
    text = node.text.decode("utf-8")
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    kind = node.type
    if kind in ("true", "false"):
        return "false" if kind == "true" else "true"
    if kind == "number":
        value = node.text.decode("utf-8").replace("_", "")
        try:
            number = int(value) if value.isdigit() else float(value)
        except ValueError:
            return f"({text}) + 1"  # hexadecimal, BigInt ...
        return repr(number + 1) if isinstance(number, int) or not number.is_integer() else repr(int(number) + 1)
    if kind in ("string", "template_string"):
        return "undefined" if len(text) <= 2 else '""'
    if kind == "binary_expression":
        operator = node.child_by_field_name("operator")
        if operator is not None and (operator.type in FLIPPED_OPERATORS or operator.type in _LOGICAL_OPERATORS):
            return f"!({text})"
    if kind == "unary_expression" and node.child_by_field_name("operator").type == "!":
        return node.child_by_field_name("argument").text.decode("utf-8")
    if kind == "undefined" or (kind == "identifier" and text == "undefined"):
        return None
    return "undefined"


def _undone_stretches(path: str, old: str, new: str) -> list[tuple[str, str]]:
    """Each stretch of lines the fix changed, alone, back to its form before the fix: a
    description and the file's text."""
    old_lines, new_lines = text_lines(old), text_lines(new)
    undone = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        block = old_lines[old_start:old_end]
        if block and not block[-1].endswith("\n") and new_end < len(new_lines):
            block = [*block[:-1], block[-1] + "\n"]
        text = "".join(new_lines[:new_start] + block + new_lines[new_end:])
        if tag == "insert":
            description = f"drop {_lines(new_start, new_end)} the fix added to {path}"
        elif tag == "delete":
            description = f"put back the {old_end - old_start} line(s) the fix removed after line {new_start} of {path}"
        else:
            description = f"{_lines(new_start, new_end)} of {path} back to their form before the fix"
        undone.append((description, text))
    return undone


def _lines(start: int, end: int) -> str:
    """0-based [start, end) as the 1-based lines people read."""
    return f"line {start + 1}" if end - start == 1 else f"lines {start + 1}-{end}"


def _changed_rows(old: str, new: str) -> set[int]:
    """The 0-based rows of ``new`` the change from ``old`` added or rewrote, and the rows on either
    side of a removal."""
    rows: set[int] = set()
    matcher = difflib.SequenceMatcher(None, text_lines(old), text_lines(new), autojunk=False)
    for tag, _, _, start, stop in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            rows.update(range(start, stop))
        elif tag == "delete":
            rows.update({max(start - 1, 0), start})
    return rows


def _tokens(root) -> tuple[str, ...]:
    """The leaves of a syntax tree, comments aside: what the code means, whatever its layout."""
    leaves: list[str] = []

    def visit(node) -> None:
        if node.type == "comment":
            return
        if node.child_count == 0:
            leaves.append(node.text.decode("utf-8"))
        for child in node.children:
            visit(child)

    visit(root)
    return tuple(leaves)


def _snippet(node) -> str:
    flat = " ".join(node.text.decode("utf-8").split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 3] + "..."
