"""The tests a test patch adds whole to a JavaScript or TypeScript test file, read with tree-sitter:
what the grader's mirror canaries copy (:func:`added_tests`, the runner facts' ``added_tests``).

A test is a statement ``it(TITLE, FUNCTION)`` (or ``test``, ``specify``, or the name the file
imports the test function under from the runner's modules: ``import check from 'ava'``) whose
title is a plain string and every line of which the patch adds, alone on its lines. Each hunk's side after the
patch is parsed on its own (tree-sitter reads a fragment that starts inside a block with an error
at the unmatched ``});`` and goes on); tests are siblings when they are statements of one block of
one hunk with no error between them, so that a copy placed beside any of them is inside the same
``describe`` block. A test's *asserted literals* are what its top-level statements assert an
expression equal to:

- ``assert.equal|strictEqual|deepEqual|deepStrictEqual(EXPR, LITERAL)`` (either side; node's
  ``assert`` and chai's assert interface);
- ``expect(EXPR).toBe|toEqual|toStrictEqual(LITERAL)`` (jest, jasmine);
- ``expect(EXPR).to.equal|eql(LITERAL)`` and chai's other language chains (``to.deep.equal`` ...);
- ``T.is|deepEqual(EXPR, LITERAL)`` (ava) and ``T.equal|equals|strictEqual|deepEqual|same(EXPR,
  LITERAL)`` (tape), ``T`` being the test function's first parameter (either side, an optional message).

A literal is a string, a number (signed or not), ``true``/``false``/``null``, or an array or object
of literals; template strings are not (their substitutions are code).
"""

from __future__ import annotations

from collections.abc import Sequence

from repo2env.languages.javascript.syntax import code_suffix, parser
from repo2env.languages.javascript.test_callees import imported_callees
from repo2env.languages.runner import AddedTest, AssertedLiteral
from repo2env.patches import FilePatch

TEST_CALLEES = frozenset({"it", "test", "specify"})
DESCRIBE_CALLEES = frozenset({"describe", "context", "suite"})
_ASSERT_METHODS = frozenset({"equal", "strictEqual", "deepEqual", "deepStrictEqual"})
#: The equality assertions of ava's and tape's execution object (the test function's parameter).
_EXECUTION_METHODS = frozenset({"is", "deepEqual", "equal", "equals", "strictEqual", "same"})
_EXPECT_METHODS = frozenset({"toBe", "toEqual", "toStrictEqual"})
_CHAI_METHODS = frozenset({"equal", "equals", "eq", "eql"})
#: chai's language chains that change nothing (``not`` is left out: it negates).
_CHAI_CHAINS = frozenset({"to", "be", "been", "is", "that", "which", "and", "has", "have", "with", "at", "of",
                          "same", "deep"})
_FUNCTIONS = frozenset({"arrow_function", "function_expression", "function"})


def added_tests(file: FilePatch, modules: Sequence[str] = (), *, test_callee: str = "") -> list[AddedTest]:
    """Every test ``file``'s hunks add whole (module docstring), in file order; ``modules`` are the
    runner's test API modules (``ava``, ``node:test`` ...), whose test function the file may import
    under a name of its own: the one its hunks show, and ``test_callee`` (the one the whole file
    imports it under, when the caller read it)."""
    suffix = code_suffix(file.new_path or "")
    if suffix is None or file.is_deleted:
        return []
    callees = TEST_CALLEES | ({imported_callees(file, tuple(modules)).test, test_callee} - {""} if modules else set())
    found = []
    for hunk_index, hunk in enumerate(file.hunks):
        lines = [(line[0], line[1:].rstrip("\r\n") + "\n") for line in hunk.lines if line[:1] in ("+", " ")]
        text = "".join(content for _, content in lines).encode("utf-8")
        starts = [0]
        for _, content in lines:
            starts.append(starts[-1] + len(content.encode("utf-8")))
        root = parser(suffix).parse(text).root_node
        for node in _test_statements(root, callees):
            first, last = node.start_point[0], node.end_point[0]
            if any(kind != "+" for kind, _ in lines[first:last + 1]) \
                    or text[starts[first]:node.start_byte].strip() or text[node.end_byte:starts[last + 1]].strip():
                continue
            call = node.named_children[0]
            title, body = call.child_by_field_name("arguments").named_children[:2]
            source = text[starts[first]:starts[last + 1]]

            def span(inner, base=starts[first], source=source):
                return (len(source[:inner.start_byte - base].decode("utf-8")),
                        len(source[:inner.end_byte - base].decode("utf-8")))

            blank = [index for index in (first - 1, last + 1) if 0 <= index < len(lines) and not lines[index][1].strip()]
            found.append(AddedTest(
                title=_plain_string(title) or "", describes=_describes(node), source=source.decode("utf-8"),
                title_span=span(title),
                asserted=tuple(AssertedLiteral(value=span(literal), arguments=tuple(span(argument) for argument in inputs))
                               for literal, inputs in _asserted(body)),
                first_line=hunk.target_start - 1 + first, last_line=hunk.target_start - 1 + last,
                block=(hunk_index, node.parent.id, _errors_before(node)), spaced=bool(blank),
                callee=call.child_by_field_name("function").text.decode("utf-8")))
    return found


def _test_statements(root, callees: frozenset[str] | set[str] = TEST_CALLEES):
    """The statements ``it(TITLE, FUNCTION);`` of ``root`` without errors, not inside another test."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "expression_statement" and _is_test(node, callees) and not node.has_error:
            yield node
            continue  # a test inside a test is not one the runner lists beside its siblings
        stack.extend(reversed(node.children))


def _is_test(statement, callees: frozenset[str] | set[str] = TEST_CALLEES) -> bool:
    call = statement.named_children[0] if statement.named_children else None
    if call is None or call.type != "call_expression":
        return False
    callee, arguments = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    if callee is None or callee.type != "identifier" or callee.text.decode() not in callees or arguments is None:
        return False
    named = arguments.named_children
    return len(named) == 2 and _plain_string(named[0]) is not None and named[1].type in _FUNCTIONS


def _plain_string(node) -> str | None:
    """The value of a string literal without escapes, else None."""
    if node.type != "string" or any(child.type == "escape_sequence" for child in node.named_children):
        return None
    return "".join(child.text.decode("utf-8") for child in node.named_children)


def _describes(node) -> tuple[str, ...]:
    titles = []
    parent = node.parent
    while parent is not None:
        if parent.type == "call_expression":
            callee, arguments = parent.child_by_field_name("function"), parent.child_by_field_name("arguments")
            if callee is not None and callee.type == "identifier" and callee.text.decode() in DESCRIBE_CALLEES \
                    and arguments is not None and arguments.named_children:
                title = _plain_string(arguments.named_children[0])
                if title is None:
                    break  # a title the id's words cannot be matched with: show nothing above it
                titles.append(title)
        parent = parent.parent
    return tuple(reversed(titles))


def _errors_before(node) -> int:
    """How many error nodes come before ``node`` among its parent's children (a fragment's stray
    ``});`` closes a block: the statements after it are not siblings of those before)."""
    count = 0
    for child in node.parent.children:
        if child.id == node.id:
            return count
        count += child.type == "ERROR" or child.is_missing
    return count


def _asserted(function) -> list[tuple[object, list]]:
    """(literal, the literal arguments of the asserted expression's calls) of each top-level
    statement of ``function``'s body that asserts an expression equal to a literal."""
    body = function.child_by_field_name("body")
    if body is None:
        return []
    execution = _first_parameter(function)
    statements = ([child.named_children[0] for child in body.named_children
                   if child.type == "expression_statement" and child.named_children]
                  if body.type == "statement_block" else [body])
    found = []
    for expression in statements:
        pair = _compared(expression, execution)
        if pair is not None:
            found.append((pair[1], _literal_arguments(pair[0])))
    return found


def _first_parameter(function) -> str | None:
    """The name of ``function``'s first parameter (ava's and tape's execution object ``t``), if a plain one."""
    single = function.child_by_field_name("parameter")  # an arrow function's parameter without parentheses
    if single is not None:
        return single.text.decode() if single.type == "identifier" else None
    parameters = function.child_by_field_name("parameters")
    first = parameters.named_children[0] if parameters is not None and parameters.named_children else None
    return first.text.decode() if first is not None and first.type == "identifier" else None


def _compared(expression, execution: str | None = None):
    """(expression, literal) when ``expression`` (a statement's) asserts one equal to the other
    (``execution``: the test function's first parameter, whose ``is``/``equal`` ... assert too)."""
    if expression.type != "call_expression":
        return None
    callee, arguments = expression.child_by_field_name("function"), expression.child_by_field_name("arguments")
    if callee is None or arguments is None or callee.type != "member_expression":
        return None
    method = callee.child_by_field_name("property").text.decode()
    owner = callee.child_by_field_name("object")
    sides = []
    if owner.type == "identifier" and owner.text.decode() == "assert" and method in _ASSERT_METHODS:
        sides = arguments.named_children[:2] if len(arguments.named_children) in (2, 3) else []
    elif execution and owner.type == "identifier" and owner.text.decode() == execution and method in _EXECUTION_METHODS:
        sides = arguments.named_children[:2] if len(arguments.named_children) in (2, 3) else []
    elif method in _EXPECT_METHODS | _CHAI_METHODS and len(arguments.named_children) == 1:
        chain = []
        while owner.type == "member_expression":
            chain.append(owner.child_by_field_name("property").text.decode())
            owner = owner.child_by_field_name("object")
        expect = owner.child_by_field_name("function") if owner.type == "call_expression" else None
        inner = owner.child_by_field_name("arguments") if owner.type == "call_expression" else None
        allowed = (not chain and method in _EXPECT_METHODS) or (
            chain and chain[-1] == "to" and set(chain) <= _CHAI_CHAINS and method in _CHAI_METHODS)
        if allowed and expect is not None and expect.type == "identifier" and expect.text.decode() == "expect" \
                and len(inner.named_children) == 1:
            sides = [inner.named_children[0], arguments.named_children[0]]
    if len(sides) != 2:
        return None
    literal = [side for side in sides if _is_literal(side)]
    other = [side for side in sides if not _is_literal(side)]
    return (other[0], literal[0]) if len(literal) == 1 and len(other) == 1 else None


def _is_literal(node) -> bool:
    if node.type in ("string", "number", "true", "false", "null"):
        return True
    if node.type == "unary_expression":
        operand = node.child_by_field_name("argument")
        return node.child_by_field_name("operator").text.decode() in ("-", "+") and operand is not None \
            and operand.type == "number"
    if node.type == "array":
        return all(_is_literal(child) for child in node.named_children if child.type != "comment")
    if node.type == "object":
        return all(child.type == "comment" or (
            child.type == "pair" and child.child_by_field_name("key").type in ("property_identifier", "string", "number")
            and _is_literal(child.child_by_field_name("value"))) for child in node.named_children)
    return False


def _literal_arguments(expression) -> list:
    """The string and number literals passed to the calls of ``expression`` (its input)."""
    found, stack = [], [expression]
    while stack:
        node = stack.pop()
        if node.type in ("call_expression", "new_expression"):
            arguments = node.child_by_field_name("arguments")
            found.extend(child for child in (arguments.named_children if arguments else ())
                         if child.type in ("string", "number"))
        stack.extend(reversed(node.named_children))
    return sorted(found, key=lambda node: node.start_byte)
