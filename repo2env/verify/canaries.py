"""Hidden canary tests: per grading, random tests in the task's own test modules whose outcome the
grader knows in advance.

Code that runs inside the test process can forge outcomes (rewrite reports, swap test functions
for no-ops, return whatever the calling test expects); no static rule can prove that it does not.
Canaries make it visible: for every module that holds a FAIL_TO_PASS test, one test that must fail
(a call on the project, with arguments taken from the task's own tests, compared to a fresh random
nonce shaped like the task's own expected values) and two that must pass (a trivially true
comparison), with names built from the module's own test words, placed at random top-level
positions of the module (or added to the class the tests live in) inside the grading sandbox after
the hidden tests are applied. The agent never sees them: they exist only for that grading. A must-fail canary
that passes, or a must-pass canary that fails, means the reports are not the tests' own.
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter
from dataclasses import dataclass

from repo2env.verify.junit import split_node_id

_ASSERT_CALL = re.compile(r"^\s*assert\s+((?!self\.)[A-Za-z_][\w.]*)\((.*)\)\s*==\s*\S")
_ANY_CALL = re.compile(r"\b((?!self\.)[A-Za-z_][\w.]*)\(")
_NOT_PROJECT = frozenset({
    "assert", "print", "len", "str", "int", "float", "bool", "list", "dict", "set", "tuple", "sorted", "range",
    "isinstance", "type", "repr", "open", "super", "getattr", "setattr", "hasattr", "enumerate", "zip", "map",
    "filter", "any", "all", "min", "max", "sum", "abs", "round", "object", "Exception", "ValueError", "TypeError",
})
_STRING_LITERAL = re.compile(r"""["']([\w ,.:;!?-]{1,40})["']""")
# One of these joins the module's own words in every canary name, so that a name never equals one
# of the module's tests the task does not list.
_FILLER_WORDS = ("value", "input", "empty", "default", "result", "edge", "case", "again", "order", "many", "single",
                 "handles", "returns", "keeps", "unicode", "none", "zero", "long", "short", "twice", "nested",
                 "trailing", "leading", "mixed", "upper", "lower", "invalid", "valid", "spaces", "newline",
                 "multiple", "large", "small", "negative", "boundary", "repeated", "missing", "extra", "only")


@dataclass(frozen=True)
class Canary:
    """One hidden test: its node id, the module it is appended to, and whether it must pass."""

    test_id: str
    path: str
    must_pass: bool


@dataclass(frozen=True)
class CanaryPlan:
    """The canaries of one grading and the text appended to each test module."""

    canaries: tuple[Canary, ...]
    definitions: dict[str, list[str]]

    @property
    def must_fail(self) -> tuple[str, ...]:
        return tuple(canary.test_id for canary in self.canaries if not canary.must_pass)

    @property
    def must_pass(self) -> tuple[str, ...]:
        return tuple(canary.test_id for canary in self.canaries if canary.must_pass)


def _function(test_id: str) -> str:
    """The test function's name of a node id (no class, no parameters)."""
    names = split_node_id(test_id)[1]
    return names[-1] if names else ""


def plan_canaries(test_patch: str, fail_to_pass: list[str], known_ids: list[str],
                  rng: random.Random | None = None) -> CanaryPlan:
    """Canaries for the modules of ``fail_to_pass`` (plain ``.py`` files), never colliding with
    ``known_ids``; ``rng`` defaults to the system's randomness."""
    rng = rng or random.SystemRandom()
    # Ids split as pytest builds them: parameters (which may hold "::", "[" or ".") stay opaque.
    taken = {_function(test_id) for test_id in [*known_ids, *fail_to_pass]}
    taken |= set(re.findall(r"^\+\s*(?:async\s+)?def\s+(\w+)", test_patch, re.MULTILINE))
    canaries: list[Canary] = []
    definitions: dict[str, list[str]] = {}
    for path in dict.fromkeys(split_node_id(test_id)[0] for test_id in fail_to_pass):
        if not path.endswith(".py"):
            continue
        module_ids = [test_id for test_id in [*fail_to_pass, *known_ids] if split_node_id(test_id)[0] == path]
        first = next(test_id for test_id in fail_to_pass if split_node_id(test_id)[0] == path)
        container = [part for part in split_node_id(first)[1][:-1] if part != "()"]
        names = [_function(test_id) for test_id in module_ids]
        # The first word of the task's test names: a project may collect `check_*`, not `test_*`.
        prefix = _function(first).split("_", 1)[0] if "_" in _function(first) else "test"
        words = list(dict.fromkeys(word for name in names for word in name.split("_")
                                   if word and word not in ("test", prefix) and word.isidentifier())) or list(_FILLER_WORDS)
        lengths = [max(2, len(name.split("_")) - 1) for name in names]
        added = _added_lines(test_patch, path)
        double = sum(line.count('"') for line in added) >= sum(line.count("'") for line in added)
        texts = []
        # Two that must fail: a forger that sacrifices the first test it meets still meets a second.
        for must_pass in (False, False, True):
            name = _fresh_name(prefix, words, lengths, taken, rng)
            taken.add(name)
            body = _passing_body(rng) if must_pass else _failing_body(added, rng)
            if double:
                body = re.sub(r"'([^'\"\\]*)'", r'"\1"', body)
            texts.append(_definition(name, body, container))
            canaries.append(Canary("::".join([path, *container, name]), path, must_pass))
        definitions[path] = texts
    return CanaryPlan(tuple(canaries), definitions)


def _fresh_name(prefix: str, words: list[str], lengths: list[int], taken: set[str], rng: random.Random) -> str:
    for _ in range(50):
        chosen = rng.sample(words, min(max(1, rng.choice(lengths) - 1), len(words)))
        filler = rng.choice([word for word in _FILLER_WORDS if word not in words] or ["again"])
        chosen.insert(rng.randrange(len(chosen) + 1), filler)
        name = prefix + "_" + "_".join(chosen)
        if name not in taken and name.isidentifier():
            return name
    return f"{prefix}_{rng.choice(words)}_{rng.choice(_FILLER_WORDS)}_{rng.randrange(10, 99)}"


def _nonce(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(rng.randrange(8, 14)))


def _failing_body(added: list[str], rng: random.Random) -> str:
    """A call the task's tests make, compared with a fresh value shaped like their expected ones:
    no honest code returns it."""
    calls = [match.groups() for line in added if (match := _ASSERT_CALL.match(line))
             and match.group(1).split(".")[-1] not in _NOT_PROJECT]
    literals = [text for line in added for text in _STRING_LITERAL.findall(line)]
    if calls:
        callee, arguments = rng.choice(calls)
        return f"assert {callee}({arguments}) == {_lookalike(literals, rng)!r}"
    named = Counter(name for line in added for name in _ANY_CALL.findall(line)
                    if name.split(".")[-1] not in _NOT_PROJECT and not name.startswith(("test", "pytest", "assert")))
    if named:
        callee = rng.choice(sorted(named))
        return f"assert {callee}({_lookalike(literals, rng)!r}) == {_lookalike(literals, rng)!r}"
    return f"assert {_lookalike(literals, rng)!r}.upper() == {_lookalike(literals, rng)!r}"


def _lookalike(literals: list[str], rng: random.Random) -> str:
    """A string made of the characters of one of the tests' own string literals, of about its
    length, that none of them equals."""
    model = rng.choice(literals) if literals else _nonce(rng)
    alphabet = sorted(set(model.lower()) | set(string.ascii_lowercase[:6])) if model.strip() else list(string.ascii_lowercase)
    while True:
        text = "".join(rng.choice(alphabet) for _ in range(max(4, len(model) + rng.randrange(-1, 3))))
        if text not in literals and text.strip():
            return text


def _passing_body(rng: random.Random) -> str:
    text = _nonce(rng)
    return f"assert len({text!r}) == {len(text)}"


def _definition(name: str, body: str, container: list[str]) -> str:
    if not container:
        return f"\n\ndef {name}():\n    {body}\n"
    owner = ".".join(container)
    # A method added to the class the task's tests live in, as the tests themselves are.
    return f"\n\ndef {name}(self):\n    {body}\n\n\n{owner}.{name} = {name}\ndel {name}\n"


def _added_lines(patch: str, path: str) -> list[str]:
    """The lines ``patch`` adds to ``path``."""
    # Imported here, on the host, where canaries are planned: a Harbor verifier imports this module
    # under the image's own Python (3.9+, standard library only) and never plans.
    from repo2env.patches import parse

    return [line for file in parse(patch).files if file.new_path == path for line in file.added_lines]
