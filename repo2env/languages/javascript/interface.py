"""What JavaScript/TypeScript syntax trees tell about the interface a task's hidden tests need: the
JavaScript profile's :meth:`~repo2env.languages.base.LanguageProfile.introduced_interface`, read
with tree-sitter (the parsers of :mod:`repo2env.languages.javascript.variants`); pure, text in,
records out.

**What the fix introduces**, in each changed code file (declaration files aside):

- an exported **function** (``export function f``, ``export const f = () => ...``, a name in
  ``export { f }``, ``module.exports = { f }``, ``module.exports.f = ...``, ``exports.f = ...``,
  ``module.exports = f``), an exported **class** (with its constructor's parameters), a **method** of
  an exported class; new when the file had no export of that name (that method) before;
- an **option key** (kind ``keyword``) of an exported function, method or class that existed before:
  a key of an object pattern among its parameters (``{ separator }``), or a property it reads of
  its options parameter (a parameter named ``options``/``opts``/``config``/``settings``, or one
  defaulting to ``{}``: ``options.separator``, ``const { separator } = options``), that it did not
  read before.

**What a test uses**: the names its code spells (identifiers, properties, imported names) and the
keys of the object literals it writes (``{ separator: "_" }``, the options it passes): its own
callback, the hooks (``beforeEach`` ...) of the describe blocks around it, and its file's code
outside every ``describe``/``it``/``test`` call (imports, ``require``, helpers). A test whose call is
not found by its titles (a title computed at run time) is read as its whole file.

A definition is needed as in Python's answer: a function, class or method when a test names it and
the issue does not (or passes it an option key the issue does not name); an option key when a test
passes it, names its owner, and the issue does not name it.

Signatures show names, parameters and plain TypeScript types (names, generics of names, unions,
arrays): ``slugify(text, { separator } = ...)``; never a body, never a default value (``= ...``
marks one; the keys of an object pattern show without theirs), never a literal type.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from repo2env.languages.interface import InterfaceNeed, interface_needs
from repo2env.languages.javascript.syntax import code_suffix, parsed
from repo2env.languages.javascript.test_ids import split_test_id
from repo2env.models import InterfaceKind

#: Parameters whose properties are read as option keys (besides any parameter defaulting to ``{}``).
OPTIONS_PARAMETERS = frozenset({"options", "opts", "option", "config", "settings", "params"})
#: Calls that declare a test or a group of tests (with ``.only``/``.skip``/``.each`` ... after them).
_TEST_CALLS = frozenset({"it", "test", "specify", "xit", "fit"})
_GROUP_CALLS = frozenset({"describe", "context", "suite", "xdescribe", "fdescribe"})
_HOOK_CALLS = frozenset({"before", "after", "beforeEach", "afterEach", "beforeAll", "afterAll", "setup",
                         "teardown", "suiteSetup", "suiteTeardown"})
_FUNCTIONS = frozenset({"function_declaration", "generator_function_declaration", "function_expression",
                        "function", "generator_function", "arrow_function"})
#: TypeScript type nodes a plain type is made of (a literal type may be the fix itself).
_PLAIN_TYPES = frozenset({"type_identifier", "predefined_type", "generic_type", "type_arguments", "union_type",
                          "array_type", "nested_type_identifier", "identifier", "parenthesized_type",
                          "intersection_type", "tuple_type", "readonly_type"})
_NAMES = frozenset({"identifier", "property_identifier", "shorthand_property_identifier",
                    "shorthand_property_identifier_pattern", "type_identifier"})
#: The nodes a definition's statement is made of, above the function or class itself.
_DEFINING_PARENTS = frozenset({"export_statement", "variable_declarator", "lexical_declaration", "variable_declaration",
                               "assignment_expression", "expression_statement", "pair"})
_WORD = re.compile(r"[A-Za-z_$][\w$]*")


@dataclass(frozen=True)
class _Definition:
    """A definition the fix introduces (see :class:`InterfaceNeed` for what becomes of it)."""

    kind: InterfaceKind
    name: str  #: what a test spells: the function, class or method name, the option key
    qualified: str
    path: str
    signature: str
    bare_signature: str
    header_lines: tuple[str, ...]
    keywords: frozenset[str] = frozenset()  #: option keys a call may pass
    owner: str = ""  #: an option key's function or class, a method's class


@dataclass(frozen=True)
class _Exported:
    """An exported function, class or method of one file: its node and what it is called."""

    kind: InterfaceKind
    name: str
    qualified: str
    node: object  #: the function, class or method node
    owner: str = ""


@dataclass
class _TestReading:
    names: set[str] = field(default_factory=set)
    keywords: set[str] = field(default_factory=set)


def introduced_interface(*, files_before: Mapping[str, str], files_after: Mapping[str, str],
                         test_files: Mapping[str, str], tests: Iterable[str], statement: str) -> list[InterfaceNeed]:
    """The exported names and option keys the fix introduces that ``tests`` use and ``statement``
    never names (module docstring), in file and source order; files that do not parse are skipped."""
    definitions = introduced_definitions(files_before, files_after)
    if not definitions:
        return []
    readings = read_tests(test_files, tests)
    used = _TestReading()
    for reading in readings.values():
        used.names |= reading.names
        used.keywords |= reading.keywords
    words = set(_WORD.findall(statement))
    return interface_needs(definitions, readings, used, lambda definition, reading: _needed(definition, reading, words))


# --- what the fix introduces -------------------------------------------------------------------


def introduced_definitions(files_before: Mapping[str, str], files_after: Mapping[str, str]) -> list[_Definition]:
    """Every exported definition and option key ``files_after`` has and ``files_before`` lacks."""
    found: list[_Definition] = []
    for path in sorted(files_after):
        suffix = code_suffix(path)
        if suffix is None:
            continue
        new_root = parsed(files_after[path], suffix)
        old_text = files_before.get(path)
        old_root = parsed(old_text, suffix) if old_text is not None else parsed("", suffix)
        if new_root is None or old_root is None:
            continue
        old_exports = {exported.qualified: exported for exported in _exports(old_root)}
        for exported in _exports(new_root):
            signature, bare = _signature(exported)
            header = _header_lines(exported.node)
            keywords = _option_keys(exported.node)
            before = old_exports.get(exported.qualified)
            if before is None:
                found.append(_Definition(exported.kind, exported.name, exported.qualified, path, signature, bare,
                                         header, keywords=keywords, owner=exported.owner))
                continue
            for key in sorted(keywords - _option_keys(before.node)):
                found.append(_Definition("keyword", key, f"{exported.qualified}({key})", path, signature, bare,
                                         header, owner=exported.name))
    return found


def _exports(root) -> list[_Exported]:
    """The exported functions and classes of a module (ES and CommonJS), and the methods of the
    exported classes, in source order."""
    declared: dict[str, object] = {}  # top-level name -> function or class node
    exported: dict[str, object] = {}  # exported name -> node
    aliases: list[tuple[str, str]] = []  # (exported name, local name)
    for statement in root.named_children:
        declaration = statement.child_by_field_name("declaration") if statement.type == "export_statement" else None
        for name, node in _declared(declaration if declaration is not None else statement):
            declared[name] = node
            if declaration is not None:
                exported[name] = node
        if statement.type == "export_statement":
            value = statement.child_by_field_name("value")  # export default <expression>
            if value is not None and value.type in _FUNCTIONS | {"class"}:
                exported["default"] = value
            for specifier in _descendants(statement, "export_specifier"):
                local = specifier.child_by_field_name("name")
                alias = specifier.child_by_field_name("alias")
                if local is not None:
                    aliases.append(((alias or local).text.decode(), local.text.decode()))
        elif statement.type == "expression_statement":
            aliases += _commonjs_exports(statement, exported)
    for name, local in aliases:
        if local in declared:
            exported.setdefault(name, declared[local])
    found: list[_Exported] = []
    for name, node in sorted(exported.items(), key=lambda item: item[1].start_byte):
        if node.type in ("class_declaration", "class", "abstract_class_declaration"):
            found.append(_Exported("class", name, name, node))
            body = node.child_by_field_name("body")
            for member in body.named_children if body is not None else ():
                method = member.child_by_field_name("name") if member.type == "method_definition" else None
                if method is None or method.type == "private_property_identifier" or method.text == b"constructor":
                    continue
                qualified = f"{name}.{method.text.decode()}"
                found.append(_Exported("method", method.text.decode(), qualified, member, owner=name))
        else:
            found.append(_Exported("function", name, name, node))
    return found


def _declared(statement) -> Iterator[tuple[str, object]]:
    """The functions and classes a top-level statement declares, by name."""
    if statement.type in ("function_declaration", "generator_function_declaration", "class_declaration",
                          "abstract_class_declaration"):
        name = statement.child_by_field_name("name")
        if name is not None:
            yield name.text.decode(), statement
    elif statement.type in ("lexical_declaration", "variable_declaration"):
        for declarator in statement.named_children:
            name, value = declarator.child_by_field_name("name"), declarator.child_by_field_name("value")
            if declarator.type == "variable_declarator" and name is not None and name.type == "identifier" \
                    and value is not None and value.type in _FUNCTIONS | {"class"}:
                yield name.text.decode(), value


def _commonjs_exports(statement, exported: dict[str, object]) -> list[tuple[str, str]]:
    """What ``module.exports = ...``, ``module.exports.x = ...`` and ``exports.x = ...`` export:
    definitions written in place go into ``exported``; names of local definitions are returned as
    (exported name, local name)."""
    assignment = statement.named_children[0] if statement.named_children else None
    if assignment is None or assignment.type != "assignment_expression":
        return []
    target, value = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    if _is_module_exports(target):
        if value.type == "identifier":
            return [(value.text.decode(), value.text.decode())]
        if value.type in _FUNCTIONS | {"class"}:
            name = value.child_by_field_name("name")
            exported[name.text.decode() if name is not None else "default"] = value
            return []
        aliases = []
        for member in value.named_children if value.type == "object" else ():
            if member.type == "shorthand_property_identifier":
                aliases.append((member.text.decode(), member.text.decode()))
            elif member.type == "pair":
                key, pair_value = member.child_by_field_name("key"), member.child_by_field_name("value")
                if pair_value.type == "identifier":
                    aliases.append((_key_text(key), pair_value.text.decode()))
                elif pair_value.type in _FUNCTIONS | {"class"}:
                    exported[_key_text(key)] = pair_value
            elif member.type == "method_definition":
                exported[member.child_by_field_name("name").text.decode()] = member
        return aliases
    # module.exports.name = ..., exports.name = ...
    if target.type == "member_expression" and target.child_by_field_name("property").type == "property_identifier":
        owner = target.child_by_field_name("object")
        if _is_module_exports(owner) or (owner.type == "identifier" and owner.text == b"exports"):
            name = target.child_by_field_name("property").text.decode()
            if value.type == "identifier":
                return [(name, value.text.decode())]
            if value.type in _FUNCTIONS | {"class"}:
                exported[name] = value
    return []


def _is_module_exports(node) -> bool:
    if node.type != "member_expression":
        return False
    owner, prop = node.child_by_field_name("object"), node.child_by_field_name("property")
    return owner.type == "identifier" and owner.text == b"module" and prop.text == b"exports"


def _option_keys(node) -> frozenset[str]:
    """The option keys a function, method or class (its constructor) reads (module docstring)."""
    if node.type in ("class_declaration", "class", "abstract_class_declaration"):
        node = _constructor(node)
        if node is None:
            return frozenset()
    parameters = node.child_by_field_name("parameters") or node.child_by_field_name("parameter")
    if parameters is None:
        return frozenset()
    keys: set[str] = set()
    options: set[str] = set()
    for parameter in parameters.named_children if parameters.type == "formal_parameters" else [parameters]:
        pattern, default = _pattern_and_default(parameter)
        if pattern is None:
            continue
        if pattern.type == "object_pattern":
            keys |= _pattern_keys(pattern)
        elif pattern.type == "identifier" and (pattern.text.decode() in OPTIONS_PARAMETERS
                                               or (default is not None and default.type == "object")):
            options.add(pattern.text.decode())
    body = node.child_by_field_name("body")
    if options and body is not None:
        for member in _descendants(body, "member_expression"):
            target, prop = member.child_by_field_name("object"), member.child_by_field_name("property")
            if target.type == "identifier" and target.text.decode() in options and prop.type == "property_identifier":
                keys.add(prop.text.decode())
        for declarator in _descendants(body, "variable_declarator"):
            name, value = declarator.child_by_field_name("name"), declarator.child_by_field_name("value")
            if name.type == "object_pattern" and value is not None and value.text.decode() in options:
                keys |= _pattern_keys(name)
    return frozenset(keys)


def _pattern_and_default(parameter):
    """A parameter's pattern and its default value node (None without one)."""
    if parameter.type in ("required_parameter", "optional_parameter"):  # TypeScript
        return parameter.child_by_field_name("pattern"), parameter.child_by_field_name("value")
    if parameter.type == "assignment_pattern":
        return parameter.child_by_field_name("left"), parameter.child_by_field_name("right")
    return parameter, None


def _pattern_keys(pattern) -> set[str]:
    """The keys an object pattern reads (``{ a, b = 1, c: d }``: a, b, c)."""
    return {key for member in pattern.named_children for key in _member_keys(member) if key}


def _constructor(class_node):
    body = class_node.child_by_field_name("body")
    return next((member for member in body.named_children if member.type == "method_definition"
                 and member.child_by_field_name("name").text == b"constructor"), None) if body is not None else None


def _signature(exported: _Exported) -> tuple[str, str]:
    """The signature shown with plain types, and the same without any."""
    node = exported.node
    if exported.kind == "class":
        constructor = _constructor(node)
        if constructor is None:
            return exported.qualified, exported.qualified
        shown, bare = _parameters(constructor)
        return f"new {exported.qualified}({shown})", f"new {exported.qualified}({bare})"
    shown, bare = _parameters(node)
    prefix = "async " if any(child.type == "async" for child in node.children) else ""
    if node.type == "method_definition":
        prefix += "".join(f"{child.type} " for child in node.children if child.type in ("static", "get", "set"))
    returns = _plain_type(node.child_by_field_name("return_type"))
    head = f"{prefix}{exported.qualified}"
    return f"{head}({shown})" + (f": {returns}" if returns else ""), f"{head}({bare})"


def _parameters(node) -> tuple[str, str]:
    parameters = node.child_by_field_name("parameters") or node.child_by_field_name("parameter")
    if parameters is None:
        return "", ""
    members = parameters.named_children if parameters.type == "formal_parameters" else [parameters]
    shown = [_parameter(member, annotate=True) for member in members if member.type != "comment"]
    bare = [_parameter(member, annotate=False) for member in members if member.type != "comment"]
    return ", ".join(shown), ", ".join(bare)


def _parameter(parameter, *, annotate: bool) -> str:
    pattern, default = _pattern_and_default(parameter)
    text = _pattern(pattern) if pattern is not None else parameter.text.decode()
    if parameter.type == "optional_parameter":
        text += "?"
    annotation = _plain_type(parameter.child_by_field_name("type")) if annotate and \
        parameter.type in ("required_parameter", "optional_parameter") else None
    if annotation:
        text += f": {annotation}"
    return text + (" = ..." if default is not None else "")


def _pattern(pattern) -> str:
    """A parameter's pattern without default values: ``{ a, b }``, ``[a, b]``, ``...rest``."""
    if pattern.type == "object_pattern":
        keys = []
        for member in pattern.named_children:
            if member.type == "rest_pattern":
                keys.append(_pattern(member))
            else:
                keys.extend(key for key in _member_keys(member) if key)
        return "{ " + ", ".join(keys) + " }" if keys else "{}"
    if pattern.type == "array_pattern":
        return "[" + ", ".join(_pattern(_pattern_and_default(member)[0]) for member in pattern.named_children) + "]"
    if pattern.type == "rest_pattern":
        inner = pattern.named_children[0] if pattern.named_children else None
        return "..." + (_pattern(inner) if inner is not None else "")
    return pattern.text.decode()


def _member_keys(member) -> list[str]:
    """The key one member of an object pattern reads (none for a rest element or a comment)."""
    if member.type == "shorthand_property_identifier_pattern":
        return [member.text.decode()]
    if member.type == "object_assignment_pattern":
        return [member.child_by_field_name("left").text.decode()]
    if member.type == "pair_pattern":
        return [_key_text(member.child_by_field_name("key"))]
    return []


def _plain_type(annotation) -> str | None:
    """A type annotation's type when it is plain (names, generics, unions, arrays), else None."""
    if annotation is None:
        return None
    kind = annotation.named_children[0] if annotation.type == "type_annotation" and annotation.named_children \
        else annotation
    if any(node.type not in _PLAIN_TYPES for node in _named_subtree(kind)):
        return None
    return " ".join(kind.text.decode().split())


def _header_lines(node) -> tuple[str, ...]:
    """The stripped lines of a definition from the first line of its statement (``export const f =``,
    ``exports.f = function``) to its body's opening line: the lines the leak check allows."""
    start = node
    while start.parent is not None and start.parent.type in _DEFINING_PARENTS:
        start = start.parent
    body = node.child_by_field_name("body")
    last = body.start_point[0] if body is not None else node.end_point[0]
    lines = start.text.decode().split("\n")[: last - start.start_point[0] + 1]
    return tuple(line.strip() for line in lines if line.strip())


# --- what the tests use --------------------------------------------------------------------


def read_tests(test_files: Mapping[str, str], tests: Iterable[str]) -> dict[str, _TestReading]:
    """What each test's code names and the option keys it writes (module docstring), by test id;
    tests of files that are absent or do not parse are left out."""
    roots = {path: root for path, text in test_files.items()
             if (suffix := code_suffix(path)) is not None and (root := parsed(text, suffix)) is not None}
    readings: dict[str, _TestReading] = {}
    for test in tests:
        path, titles = split_test_id(test)
        root = roots.get(path)
        if root is None:
            continue
        reading = _TestReading()
        parts = _test_parts(root, titles)
        for part in parts if parts is not None else [root]:
            _collect(part, reading)
        readings[test] = reading
    return readings


def _test_parts(root, titles: tuple[str, ...]):
    """The nodes a test's run reads: the file's code outside test and describe calls, the hooks of
    the describe blocks around the test, the test's callback; None when no call has its titles."""
    parts = _shared(root)
    scope = root
    for depth, title in enumerate(titles):
        wanted = _TEST_CALLS if depth == len(titles) - 1 else _GROUP_CALLS
        match = next((call[2] for statement in _statements(scope)
                      if (call := _test_call(statement)) is not None and call[0] in wanted and call[1] == title), None)
        if match is None:
            return None
        parts += _shared(match) if wanted is _GROUP_CALLS else [match]
        scope = match
    return parts


def _shared(scope) -> list:
    """The statements of a file or describe callback that run for each of its tests: hooks and
    every statement that declares no test or describe block."""
    return [statement for statement in _statements(scope)
            if (call := _test_call(statement)) is None or call[0] in _HOOK_CALLS]


def _statements(callback) -> list:
    """The top-level statements of a describe callback's body (of the program for the root)."""
    if callback.type == "program":
        return list(callback.named_children)
    body = callback.child_by_field_name("body")
    return list(body.named_children) if body is not None and body.type == "statement_block" else []


def _test_call(statement):
    """(callee, title, callback) of a statement that calls a test, describe or hook function."""
    if statement.type != "expression_statement" or not statement.named_children:
        return None
    call = statement.named_children[0]
    if call.type != "call_expression":
        return None
    callee = call.child_by_field_name("function")
    while callee is not None and callee.type in ("member_expression", "call_expression"):
        # it.only(...), describe.each(table)(...), test.skip(...)
        callee = callee.child_by_field_name("object") or callee.child_by_field_name("function")
    name = callee.text.decode() if callee is not None and callee.type == "identifier" else ""
    if name not in _TEST_CALLS | _GROUP_CALLS | _HOOK_CALLS:
        return None
    arguments = call.child_by_field_name("arguments")
    values = [child for child in arguments.named_children if child.type != "comment"] if arguments else []
    callback = next((value for value in values if value.type in _FUNCTIONS), None)
    title = _string_value(values[0]) if values else None
    return name, title, callback if callback is not None else call


def _string_value(node) -> str | None:
    if node.type == "string":
        return "".join(child.text.decode() for child in node.named_children if child.type in
                       ("string_fragment", "escape_sequence"))
    if node.type == "template_string" and not any(child.type == "template_substitution" for child in node.children):
        return "".join(child.text.decode() for child in node.named_children)
    return None


def _collect(node, reading: _TestReading) -> None:
    """The names ``node``'s code spells and the keys of the object literals it writes."""
    for child in _named_subtree(node):
        if child.type in _NAMES:
            reading.names.add(child.text.decode())
        if child.type == "shorthand_property_identifier":
            reading.keywords.add(child.text.decode())
        elif child.type == "pair" and child.parent is not None and child.parent.type == "object":
            key = _key_text(child.child_by_field_name("key"))
            if key:
                reading.keywords.add(key)


def _needed(definition: _Definition, used: _TestReading, words: set[str]) -> bool:
    if definition.kind == "keyword":
        return definition.name in used.keywords and definition.owner in used.names and definition.name not in words
    if definition.name not in used.names:
        return False
    unnamed_keys = {key for key in definition.keywords & used.keywords if key not in words}
    return definition.name not in words or bool(unnamed_keys)


# --- tree helpers --------------------------------------------------------------------------


def _key_text(key) -> str:
    """A property key as written: ``separator`` for ``separator``, ``"q-r"`` and ``'q-r'`` alike;
    '' for a computed key."""
    if key is None or key.type == "computed_property_name":
        return ""
    return _string_value(key) or "" if key.type == "string" else key.text.decode()


def _named_subtree(node) -> Iterator:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.named_children))


def _descendants(node, kind: str) -> Iterator:
    return (child for child in _named_subtree(node) if child.type == kind)
