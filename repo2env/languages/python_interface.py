"""What Python syntax trees tell about a task's fairness: the names the fix introduces that the
hidden tests need, and what those tests assert. Read with :mod:`libcst`; pure, text in, records out.

This is the Python half of two questions validation asks every task (:mod:`repo2env.validate.quality`):

- :func:`introduced_interface`: which names does the gold patch introduce (a function, method,
  class, module-level name, keyword argument of an existing function, module, command-line option)
  that the FAIL_TO_PASS tests use and the issue text never names? An agent cannot guess them, so
  validation either writes them into the instruction (names and signatures only) or rejects the task.
- :func:`assertion_shapes`: what each FAIL_TO_PASS test checks: an exact error message, a string
  that reads like prose, or anything else (a value, a type, an exception class).

:func:`introduced_interface` is the Python profile's answer to
:meth:`~repo2env.languages.base.LanguageProfile.introduced_interface` (the JavaScript profile's is
:mod:`repo2env.languages.javascript.interface`, from tree-sitter trees); :func:`assertion_shapes`
is still asked of this module directly (the records say nothing about Python).

What a test *uses* is everything its code names: the test function (decorators included), the
fixtures it asks for and the helpers it calls that are defined in the test files (followed a few
levels deep), its class's set-up methods, and the module-level code of its file (imports
included: a test module that imports a name the fix adds fails whole before the fix).

Signatures show names, parameter kinds and plain type annotations; never a body, never a default
value (a parameter with one shows ``= ...``: the value may be the fix itself), never an annotation
holding a literal (``Literal["a"]``, ``Annotated[int, Field(gt=0)]``) or a call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import libcst as cst
from libcst.helpers import get_full_name_for_node

from repo2env import pysyntax
from repo2env.languages.interface import InterfaceNeed, interface_needs
from repo2env.languages.test_ids import split_node_id
from repo2env.models import InterfaceKind

AssertionKind = Literal["message", "string", "other"]

#: How deep fixtures and helpers of the test files are followed from a test.
_HELPER_DEPTH = 3
#: A string compared in an assertion reads like prose (a message) from this many words on.
PROSE_WORDS = 3
_WORD = re.compile(r"[A-Za-z]+")
_OPTION = re.compile(r"-{1,2}[A-Za-z][\w-]*(?:/-{1,2}[A-Za-z][\w-]*)?")
#: Calls whose option strings declare a command-line option (click, argparse, optparse, typer).
_OPTION_CALLS = ("option", "add_argument", "add_option", "Option", "argument")
# An annotation is shown only when it is a plain type: names, dots, subscripts, unions, None.
_PLAIN_TYPE = re.compile(r"[\w.\[\], |]+")
_QUOTED_NAME = re.compile(r"""(["'])([A-Za-z_][\w.]*)\1""")
#: Methods of a test class that run before each of its tests (pytest's and unittest's).
_SET_UP = frozenset({"setup_method", "setUp", "setup", "setup_class", "setUpClass", "setup_module"})
#: Assertions of the unittest style whose second argument is compared with the first.
_UNITTEST_COMPARE = frozenset({"assertEqual", "assertEquals", "assertIn", "assertNotEqual", "assertNotIn",
                               "assertMultiLineEqual", "assertRegex", "assertNotRegex", "assertRegexpMatches",
                               "assertStartsWith", "assertEndsWith", "assertCountEqual"})
_UNITTEST_MESSAGE = frozenset({"assertRaisesRegex", "assertRaisesRegexp", "assertWarnsRegex"})
_RAISES = frozenset({"raises", "warns", "deprecated_call"})


@dataclass(frozen=True)
class Assertion:
    """One check a test makes: ``message`` (an exact error or warning message: ``match=``,
    ``assertRaisesRegex``), ``string`` (a comparison with string literals) or ``other``; with the
    string literals it compares against."""

    kind: AssertionKind
    literals: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Definition:
    """A definition the fix introduces."""

    kind: InterfaceKind
    name: str  #: what a test spells: the simple name, the keyword, the option
    qualified: str
    path: str
    signature: str
    bare_signature: str
    header_lines: tuple[str, ...]
    keywords: frozenset[str] = frozenset()  #: parameters a call may pass by name
    owner: str = ""  #: a keyword's function, a method's class (simple names)


@dataclass
class _TestReading:
    """What one test's code names."""

    names: set[str] = field(default_factory=set)
    keywords: set[str] = field(default_factory=set)
    strings: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)
    assertions: list[Assertion] = field(default_factory=list)


def introduced_interface(*, files_before: Mapping[str, str], files_after: Mapping[str, str],
                         test_files: Mapping[str, str], tests: Iterable[str], statement: str) -> list[InterfaceNeed]:
    """The names the gold patch introduces that ``tests`` use and ``statement`` never names.

    ``files_before`` / ``files_after``: the fix's source files before and after it (a file missing
    before is a new module); ``test_files``: the test files after the test patch; ``tests``: test
    ids (``path::Class::name[param]``). A function, class or method is needed when a test names it
    and the statement does not, or when a test passes it a keyword the statement does not name; a
    keyword added to an existing function when a test passes it; a module when a test imports it;
    an option when a test passes its string. Files that do not parse are skipped.
    """
    definitions = introduced_definitions(files_before, files_after)
    if not definitions:
        return []
    readings = read_tests(test_files, tests)
    used = _TestReading()
    for reading in readings.values():
        used.names |= reading.names
        used.keywords |= reading.keywords
        used.strings |= reading.strings
        used.modules |= reading.modules
    named = _StatementNames(statement)
    return interface_needs(definitions, readings, used, lambda definition, reading: _needed(definition, reading, named))


def assertion_shapes(*, test_files: Mapping[str, str], tests: Iterable[str]) -> dict[str, list[Assertion]]:
    """Every test's assertions (its helpers' included), by test id; a test whose file does not
    parse or holds no such function is absent."""
    return {test: reading.assertions for test, reading in read_tests(test_files, tests).items()}


def behaviour_names(*, files_before: Mapping[str, str], files_after: Mapping[str, str],
                    test_files: Mapping[str, str], tests: Iterable[str]) -> set[str]:
    """Names of the functions, classes and methods the fix adds or changes that ``tests`` use:
    the behaviour the tests check, as a statement would name it."""
    changed = changed_definitions(files_before, files_after)
    used: set[str] = set()
    for reading in read_tests(test_files, tests).values():
        used |= reading.names
    return changed & used


# --- what the fix introduces -------------------------------------------------------------------


def introduced_definitions(files_before: Mapping[str, str], files_after: Mapping[str, str]) -> list[_Definition]:
    """Every definition ``files_after`` has and ``files_before`` lacks, in file and source order."""
    found: list[_Definition] = []
    for path in sorted(files_after):
        if not path.endswith(".py"):
            continue
        new_module = _parsed(files_after[path])
        if new_module is None:
            continue
        old_text = files_before.get(path)
        old_module = _parsed(old_text) if old_text is not None else cst.Module(body=[])
        if old_module is None:
            continue
        module = module_name(path)
        if old_text is None:
            found.append(_Definition("module", module.rsplit(".", 1)[-1], module, path, module, module, ()))
        old_scope, new_scope = _Scope.of(old_module), _Scope.of(new_module)
        for qualname, node in new_scope.definitions.items():
            old_node = old_scope.definitions.get(qualname)
            if old_node is None:
                found.append(_definition(new_module, node, qualname, module, path))
            elif isinstance(node, cst.FunctionDef) and isinstance(old_node, cst.FunctionDef):
                added = _keywords(node) - _keywords(old_node)
                header = _header_lines(new_module, node)
                signature, bare = _signature(new_module, node, f"{module}.{qualname}")
                found += [_Definition("keyword", keyword, f"{module}.{qualname}({keyword})", path, signature, bare,
                                      header, owner=qualname.rsplit(".", 1)[-1]) for keyword in sorted(added)]
        for name in sorted(set(new_scope.assigned) - set(old_scope.assigned) - set(new_scope.definitions)):
            found.append(_Definition("name", name, f"{module}.{name}", path, f"{module}.{name}", f"{module}.{name}", ()))
        old_options = set(_Scope.options_of(old_module))
        for option, spellings in _Scope.options_of(new_module).items():
            if option not in old_options:
                found.append(_Definition("cli_option", option, spellings, path, spellings, spellings, ()))
    return found


def changed_definitions(files_before: Mapping[str, str], files_after: Mapping[str, str]) -> set[str]:
    """Simple names of the functions, classes and methods the fix adds or whose code it changes."""
    changed: set[str] = set()
    for path, text in files_after.items():
        if not path.endswith(".py"):
            continue
        new_module = _parsed(text)
        old_text = files_before.get(path)
        old_module = _parsed(old_text) if old_text is not None else cst.Module(body=[])
        if new_module is None or old_module is None:
            continue
        old_definitions = _Scope.of(old_module).definitions
        for qualname, node in _Scope.of(new_module).definitions.items():
            old = old_definitions.get(qualname)
            if old is None or not node.deep_equals(old):
                changed.add(qualname.rsplit(".", 1)[-1])
    return changed


def module_name(path: str) -> str:
    """``src/pkg/mod.py`` -> ``pkg.mod``; ``pkg/__init__.py`` -> ``pkg``."""
    parts = path.removesuffix(".py").split("/")
    if len(parts) > 1 and parts[0] in ("src", "lib"):
        parts = parts[1:]
    if len(parts) > 1 and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class _Scope:
    """A module's definitions by qualified name (top-level functions and classes, and the methods
    of top-level classes) and the names its top level assigns."""

    def __init__(self) -> None:
        self.definitions: dict[str, cst.FunctionDef | cst.ClassDef] = {}
        self.assigned: list[str] = []

    @classmethod
    def of(cls, module: cst.Module) -> _Scope:
        scope = cls()
        for statement in _top_level(module.body):
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                scope.definitions.setdefault(statement.name.value, statement)
                if isinstance(statement, cst.ClassDef):
                    for member in _top_level(statement.body.body):
                        if isinstance(member, cst.FunctionDef) and not _is_dunder(member.name.value):
                            scope.definitions.setdefault(f"{statement.name.value}.{member.name.value}", member)
            elif isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    scope.assigned += [name for name in _assigned_names(small)
                                       if not _is_dunder(name) and not name.startswith("_")]
        return scope

    @staticmethod
    def options_of(module: cst.Module) -> dict[str, str]:
        """Each command-line option a call declares (first spelling -> all spellings, ``--x/-x``)."""
        finder = _OptionFinder()
        module.visit(finder)
        return finder.options


def _top_level(statements: Iterable[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """Statements of a block, those under ``if``/``try`` (version checks, optional imports) included."""
    for statement in statements:
        if isinstance(statement, cst.If):
            yield from _top_level(statement.body.body)
            if isinstance(statement.orelse, cst.Else):
                yield from _top_level(statement.orelse.body.body)
            elif isinstance(statement.orelse, cst.If):
                yield from _top_level([statement.orelse])
        elif isinstance(statement, cst.Try):
            yield from _top_level(statement.body.body)
            for handler in statement.handlers:
                yield from _top_level(handler.body.body)
        else:
            yield statement


def _assigned_names(small: cst.BaseSmallStatement) -> list[str]:
    if isinstance(small, cst.Assign):
        return [target.target.value for target in small.targets if isinstance(target.target, cst.Name)]
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
        return [small.target.value]
    return []


class _OptionFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.options: dict[str, str] = {}

    def visit_Call(self, node: cst.Call) -> None:
        callee = get_full_name_for_node(node.func) or ""
        if callee.rsplit(".", 1)[-1] not in _OPTION_CALLS:
            return
        spellings = [value for arg in node.args if arg.keyword is None
                     and isinstance(value := _string_value(arg.value), str) and _OPTION.fullmatch(value)]
        if spellings:
            self.options.setdefault(spellings[0].split("/")[0], " ".join(spellings))


def _definition(module: cst.Module, node: cst.FunctionDef | cst.ClassDef, qualname: str, module_dotted: str,
                path: str) -> _Definition:
    qualified = f"{module_dotted}.{qualname}"
    owner = qualname.split(".")[0] if "." in qualname else ""
    if isinstance(node, cst.ClassDef):
        signature, bare = _class_signature(module, node, qualified)
        init = next((member for member in _top_level(node.body.body)
                     if isinstance(member, cst.FunctionDef) and member.name.value == "__init__"), None)
        header = _header_lines(module, node) + (_header_lines(module, init) if init else ())
        return _Definition("class", node.name.value, qualified, path, signature, bare, header,
                           keywords=_keywords(init) if init else frozenset())
    signature, bare = _signature(module, node, qualified)
    return _Definition("method" if owner else "function", node.name.value, qualified, path, signature, bare,
                       _header_lines(module, node), keywords=_keywords(node), owner=owner)


def _keywords(node: cst.FunctionDef) -> frozenset[str]:
    """The parameters a call may pass by name."""
    params = node.params
    return frozenset(param.name.value for param in (*params.params, *params.kwonly_params))


def _signature(module: cst.Module, node: cst.FunctionDef, qualified: str) -> tuple[str, str]:
    """``qualified(params) -> returns`` with plain annotations, and the same without any."""
    shown, bare = [], []
    params = node.params
    for param in params.posonly_params:
        shown.append(_param(module, param, annotate=True))
        bare.append(_param(module, param, annotate=False))
    if params.posonly_params:
        shown.append("/")
        bare.append("/")
    for param in params.params:
        shown.append(_param(module, param, annotate=True))
        bare.append(_param(module, param, annotate=False))
    if isinstance(params.star_arg, cst.Param):
        shown.append("*" + _param(module, params.star_arg, annotate=True))
        bare.append("*" + _param(module, params.star_arg, annotate=False))
    elif params.kwonly_params:
        shown.append("*")
        bare.append("*")
    for param in params.kwonly_params:
        shown.append(_param(module, param, annotate=True))
        bare.append(_param(module, param, annotate=False))
    if params.star_kwarg is not None:
        shown.append("**" + _param(module, params.star_kwarg, annotate=True))
        bare.append("**" + _param(module, params.star_kwarg, annotate=False))
    returns = _plain_annotation(module, node.returns)
    prefix = "async " if node.asynchronous else ""
    decorators = [name for decorator in node.decorators
                  if (name := get_full_name_for_node(decorator.decorator)) in ("property", "staticmethod", "classmethod")]
    suffix = f" ({decorators[0]})" if decorators else ""
    return (f"{prefix}{qualified}({', '.join(shown)})" + (f" -> {returns}" if returns else "") + suffix,
            f"{prefix}{qualified}({', '.join(bare)})" + suffix)


def _class_signature(module: cst.Module, node: cst.ClassDef, qualified: str) -> tuple[str, str]:
    bases = [name for arg in node.bases if arg.keyword is None and (name := get_full_name_for_node(arg.value))]
    head = f"{qualified}({', '.join(bases)})" if bases else qualified
    init = next((member for member in _top_level(node.body.body)
                 if isinstance(member, cst.FunctionDef) and member.name.value == "__init__"), None)
    if init is None:
        return head, head
    shown, bare = _signature(module, init, node.name.value)
    return f"{head}, constructed as {shown}", f"{head}, constructed as {bare}"


def _param(module: cst.Module, param: cst.Param, *, annotate: bool) -> str:
    text = param.name.value
    annotation = _plain_annotation(module, param.annotation) if annotate else None
    if annotation:
        text += f": {annotation}"
    if param.default is not None:
        text += " = ..." if annotation else "=..."
    return text


def _plain_annotation(module: cst.Module, annotation: cst.Annotation | None) -> str | None:
    """The annotation's code when it is a plain type (names, dots, subscripts, unions, None,
    quoted names), else None: a literal or a call in it may be the fix itself."""
    if annotation is None:
        return None
    code = " ".join(module.code_for_node(annotation.annotation).split())
    if re.search(r"\b(?:Literal|Annotated)\b", code):
        return None
    code = _QUOTED_NAME.sub(lambda match: match.group(2), code)
    if not _PLAIN_TYPE.fullmatch(code) or any(part[:1].isdigit() for part in re.split(r"[\[\], |.]+", code)):
        return None
    return code


def _header_lines(module: cst.Module, node: cst.FunctionDef | cst.ClassDef) -> tuple[str, ...]:
    """The stripped lines of a definition's header (decorators to the colon), its body left out."""
    bodiless = node.with_changes(leading_lines=[], body=cst.SimpleStatementSuite(body=[cst.Pass()]))
    lines = [line.strip() for line in module.code_for_node(bodiless).splitlines()]
    if lines and lines[-1].endswith(": pass"):
        lines[-1] = lines[-1].removesuffix(" pass")
    return tuple(line for line in lines if line)


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


# --- what the tests use --------------------------------------------------------------------


def read_tests(test_files: Mapping[str, str], tests: Iterable[str]) -> dict[str, _TestReading]:
    """What each test's code names and asserts (module-level code, set-up, fixtures and helpers of
    the test files included), by test id; tests not found are absent."""
    modules = {path: module for path, text in test_files.items()
               if path.endswith(".py") and (module := _parsed(text)) is not None}
    files = {path: _TestFile.of(module) for path, module in modules.items()}
    readings = {}
    for test in tests:
        path, parts, _ = split_node_id(test)
        test_file = files.get(path)
        if test_file is None or not parts:
            continue
        function = test_file.find(parts)
        if function is None:
            continue
        shared = [files[other] for other in _conftests(path, files)]
        readings[test] = test_file.reading(function, parts[:-1], shared)
    return readings


def _conftests(path: str, files: Mapping[str, _TestFile]) -> list[str]:
    """The conftest.py files among ``files`` that apply to the test file at ``path``."""
    folders = path.split("/")[:-1]
    candidates = ["/".join([*folders[:depth], "conftest.py"]) for depth in range(len(folders) + 1)]
    return [candidate for candidate in candidates if candidate in files and candidate != path]


class _TestFile:
    """One parsed test file: its functions and classes, and its module-level code."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.functions: dict[str, cst.FunctionDef] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.top_level: list[cst.CSTNode] = []

    @classmethod
    def of(cls, module: cst.Module) -> _TestFile:
        test_file = cls(module)
        for statement in _top_level(module.body):
            if isinstance(statement, cst.FunctionDef):
                test_file.functions.setdefault(statement.name.value, statement)
            elif isinstance(statement, cst.ClassDef):
                test_file.classes.setdefault(statement.name.value, statement)
            else:
                test_file.top_level.append(statement)
        return test_file

    def find(self, parts: list[str]) -> cst.FunctionDef | None:
        if len(parts) == 1:
            return self.functions.get(parts[0])
        holder = self.classes.get(parts[0])
        for name in parts[1:-1]:
            holder = next((member for member in _top_level(holder.body.body)
                           if isinstance(member, cst.ClassDef) and member.name.value == name), None) if holder else None
        if holder is None:
            return None
        return next((member for member in _top_level(holder.body.body)
                     if isinstance(member, cst.FunctionDef) and member.name.value == parts[-1]), None)

    def reading(self, function: cst.FunctionDef, class_path: list[str], shared: list[_TestFile]) -> _TestReading:
        reading = _TestReading()
        collector = _Collector(reading)
        for statement in self.top_level:
            statement.visit(collector)
        for conftest in shared:
            for statement in conftest.top_level:
                statement.visit(collector)
        holder = self.classes.get(class_path[0]) if class_path else None
        if holder is not None:
            for member in _top_level(holder.body.body):
                if not isinstance(member, cst.FunctionDef) or member.name.value in _SET_UP:
                    member.visit(collector)
        asserting = _Collector(reading, assertions=True)
        function.visit(asserting)
        helpers = {**{name: node for other in shared for name, node in other.functions.items()}, **self.functions}
        if holder is not None:
            helpers.update({member.name.value: member for member in _top_level(holder.body.body)
                            if isinstance(member, cst.FunctionDef)})
        wanted = {param.name.value for param in (*function.params.params, *function.params.kwonly_params)}
        seen = {function.name.value}
        for _ in range(_HELPER_DEPTH):
            wanted |= reading.names
            batch = [helpers[name] for name in sorted(wanted - seen) if name in helpers]
            seen |= wanted
            if not batch:
                break
            for helper in batch:
                helper.visit(asserting)
        return reading


class _Collector(cst.CSTVisitor):
    """Adds what visited code names to a reading; with ``assertions``, its assertions too."""

    def __init__(self, reading: _TestReading, *, assertions: bool = False) -> None:
        self.reading = reading
        self.assertions = assertions

    def visit_Name(self, node: cst.Name) -> None:
        self.reading.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.reading.names.add(node.attr.value)

    def visit_Call(self, node: cst.Call) -> None:
        self.reading.keywords.update(arg.keyword.value for arg in node.args if arg.keyword is not None)
        if self.assertions:
            assertion = _call_assertion(node)
            if assertion is not None:
                self.reading.assertions.append(assertion)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = _string_value(node)
        if isinstance(value, str):
            self.reading.strings.add(value)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = get_full_name_for_node(alias.name) or ""
            self.reading.modules.add(dotted)
            self.reading.names.update(dotted.split("."))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        base = get_full_name_for_node(node.module) if node.module is not None else ""
        if base:
            self.reading.modules.add(base)
            self.reading.names.update(base.split("."))
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = get_full_name_for_node(alias.name) or ""
            self.reading.names.add(name)
            if base:
                self.reading.modules.add(f"{base}.{name}")

    def visit_Assert(self, node: cst.Assert) -> None:
        if self.assertions:
            literals = _compared_strings(node.test)
            self.reading.assertions.append(Assertion("string", literals) if literals else Assertion("other"))


def _call_assertion(node: cst.Call) -> Assertion | None:
    """The assertion a call makes (``pytest.raises(E, match=...)``, ``self.assertEqual(x, "...")``,
    ``excinfo.match("...")``), or None when it makes none."""
    callee = get_full_name_for_node(node.func) or ""
    last = callee.rsplit(".", 1)[-1]
    positional = [arg.value for arg in node.args if arg.keyword is None]
    if last in _RAISES:
        match = next((arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "match"), None)
        value = _string_value(match) if match is not None else None
        return Assertion("message", (value,)) if isinstance(value, str) else Assertion("other")
    if last == "match" and "." in callee and positional:
        value = _string_value(positional[0])
        return Assertion("message", (value,)) if isinstance(value, str) else None
    if last in _UNITTEST_MESSAGE:
        value = _string_value(positional[1]) if len(positional) > 1 else None
        return Assertion("message", (value,)) if isinstance(value, str) else Assertion("other")
    if last in _UNITTEST_COMPARE:
        literals = tuple(value for argument in positional[:2] if isinstance(value := _string_value(argument), str))
        return Assertion("string", literals) if literals else Assertion("other")
    if last.startswith("assert") and "." in callee and callee.split(".")[0] == "self":
        return Assertion("other")
    return None


def _compared_strings(test: cst.BaseExpression) -> tuple[str, ...]:
    """The string literals an ``assert``'s comparison compares against; empty when it compares
    anything else too, or is no comparison."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _compared_strings(test.expression)
    if not isinstance(test, cst.Comparison):
        return ()
    sides = [test.left, *(target.comparator for target in test.comparisons)]
    literals = tuple(value for side in sides if isinstance(value := _string_value(side), str))
    return literals if literals and len(literals) < len(sides) else ()


def _string_value(node: cst.BaseExpression | None) -> str | bytes | None:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        try:
            return pysyntax.string_value(node)
        except Exception:  # noqa: BLE001 - libcst evaluates with literal_eval; a bad escape is no string
            return None
    return None


# --- matching ----------------------------------------------------------------------------------


class _StatementNames:
    """Whether the issue text names a word (``read_table``), an option (``--color``) or a module."""

    def __init__(self, statement: str) -> None:
        self.statement = statement
        self.words = set(re.findall(r"[A-Za-z_][\w]*", statement))

    def names(self, word: str) -> bool:
        return word in self.words

    def names_option(self, spellings: str) -> bool:
        return any(re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", self.statement)
                   for spelling in re.split(r"[ /]", spellings) if spelling)


def _needed(definition: _Definition, used: _TestReading, named: _StatementNames) -> bool:
    if definition.kind == "module":
        imported = any(module == definition.qualified or module.endswith("." + definition.qualified)
                       or module.startswith(definition.qualified + ".") for module in used.modules)
        return imported and not named.names(definition.name)
    if definition.kind == "cli_option":
        spellings = definition.qualified.replace("/", " ").split()
        passed = any(string == spelling or string.startswith(spelling + "=")
                     for string in used.strings for spelling in spellings)
        return passed and not named.names_option(definition.qualified)
    if definition.kind == "keyword":
        return definition.name in used.keywords and definition.owner in used.names and not named.names(definition.name)
    if definition.name not in used.names:
        return False
    unnamed_keywords = {keyword for keyword in definition.keywords & used.keywords if not named.names(keyword)}
    return not named.names(definition.name) or bool(unnamed_keywords)


# One task's files are read by several questions in a row; libcst trees are immutable.
@lru_cache(maxsize=64)
def _parsed(text: str | None) -> cst.Module | None:
    if text is None:
        return None
    try:
        return cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
