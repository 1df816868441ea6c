"""Drawing a grading's canaries (:mod:`repo2env.verify.canaries`) from a task's hidden tests.

What a module's canaries are drawn from is read once per task into a :class:`CanaryModule` (part
of the grading specification); each grading then draws its own: for every module that holds a
FAIL_TO_PASS test, two tests that must fail (a call on the project, with arguments taken from the
task's own tests, compared to a fresh random value shaped like the task's own expected values) and
one that must pass (a trivially true comparison), with names built from the module's own test
words, placed at random top-level positions of the module (or added to the class the tests live
in) inside the grading sandbox after the hidden tests are applied. The agent never sees them: they
exist only for that grading.
"""

from __future__ import annotations

import random
import re
import string
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from repo2env.patches import Patch
from repo2env.verify.canaries import Canary, CanaryPlan
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


class CanaryModule(BaseModel):
    """What one test module's canaries are drawn from (read once per task from the hidden tests)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(description="The test module (a FAIL_TO_PASS test's file).")
    container: list[str] = Field(description="The classes its first FAIL_TO_PASS test lives in ([] at module level).")
    prefix: str = Field(description="The first word of its tests' names (a project may collect check_*).")
    words: list[str] = Field(description="The words of its tests' names, canary names are made of.")
    lengths: list[int] = Field(description="How many words its tests' names have.")
    taken: list[str] = Field(description="Names a canary may not take: the task's tests and every function the hidden tests define.")
    added_lines: list[str] = Field(description="The lines the hidden tests add to the module (calls and values come from them).")
    style: str = Field("python", description="How its canaries are written: 'python' (pytest functions) or "
                                             "'describe-it' (JavaScript's describe/it globals: mocha, jest, jasmine).")


def _function(test_id: str) -> str:
    """The test function's name of a node id (no class, no parameters)."""
    names = split_node_id(test_id)[1]
    return names[-1] if names else ""


def canary_modules(hidden_tests: Patch, fail_to_pass: list[str], known_ids: list[str]) -> list[CanaryModule]:
    """What the canaries of each module of ``fail_to_pass`` (plain ``.py`` files) are drawn from."""
    # Ids split as pytest builds them: parameters (which may hold "::", "[" or ".") stay opaque.
    taken = {_function(test_id) for test_id in [*known_ids, *fail_to_pass]}
    taken |= {found for line in hidden_tests.added_lines for found in re.findall(r"^\s*(?:async\s+)?def\s+(\w+)", line)}
    modules = []
    for path in dict.fromkeys(split_node_id(test_id)[0] for test_id in fail_to_pass):
        if not path.endswith(".py"):
            continue
        module_ids = [test_id for test_id in [*fail_to_pass, *known_ids] if split_node_id(test_id)[0] == path]
        first = next(test_id for test_id in fail_to_pass if split_node_id(test_id)[0] == path)
        names = [_function(test_id) for test_id in module_ids]
        prefix = _function(first).split("_", 1)[0] if "_" in _function(first) else "test"
        words = list(dict.fromkeys(word for name in names for word in name.split("_")
                                   if word and word not in ("test", prefix) and word.isidentifier())) or list(_FILLER_WORDS)
        modules.append(CanaryModule(
            path=path, container=[part for part in split_node_id(first)[1][:-1] if part != "()"], prefix=prefix,
            words=words, lengths=[max(2, len(name.split("_")) - 1) for name in names], taken=sorted(taken),
            added_lines=[line for file in hidden_tests.files if file.new_path == path for line in file.added_lines]))
    return modules


#: JavaScript runners whose test files see describe/it as globals (vitest's only with its globals
#: option; ava, tape and node's runner have none): canaries are placed for these.
DESCRIBE_IT_RUNNERS = frozenset({"mocha", "jest", "jasmine"})


def script_canary_modules(hidden_tests: Patch, fail_to_pass: list[str], runner: str) -> list[CanaryModule]:
    """What the canaries of each JavaScript test file of ``fail_to_pass`` are drawn from (ids
    ``<file>::<describe> > <title>``): its describe titles and the words of its tests' titles.
    None for a runner without describe/it globals (:data:`DESCRIBE_IT_RUNNERS`)."""
    from repo2env.languages.javascript.test_ids import split_test_id

    if runner not in DESCRIBE_IT_RUNNERS:
        return []
    modules = []
    for path in dict.fromkeys(split_test_id(test_id)[0] for test_id in fail_to_pass):
        titles = [split_test_id(test_id)[1] for test_id in fail_to_pass if split_test_id(test_id)[0] == path]
        titles = [one for one in titles if one]
        if not titles:
            continue
        words = list(dict.fromkeys(word for one in titles for word in re.findall(r"[A-Za-z]{2,}", one[-1])))
        modules.append(CanaryModule(
            path=path, container=list(titles[0][:-1]), prefix="", words=words or list(_FILLER_WORDS),
            lengths=[max(2, len(one[-1].split())) for one in titles], taken=sorted({one[-1] for one in titles}),
            added_lines=[line for file in hidden_tests.files if file.new_path == path for line in file.added_lines],
            style="describe-it"))
    return modules


def _script_canaries(module: CanaryModule, rng: random.Random) -> tuple[list[Canary], list[str]]:
    """A describe-it module's canaries: two that must fail, one that must pass, each in the describe
    blocks of the module's first FAIL_TO_PASS test (JavaScript, appended to the file)."""
    from repo2env.languages.javascript.test_ids import test_id

    taken = set(module.taken)
    canaries, texts = [], []
    for must_pass in (False, False, True):
        for _ in range(50):
            chosen = rng.sample(module.words, min(max(1, rng.choice(module.lengths) - 1), len(module.words)))
            chosen.insert(rng.randrange(len(chosen) + 1), rng.choice(_FILLER_WORDS))
            title = " ".join(chosen)
            if title not in taken:
                break
        else:
            title = " ".join([*chosen, secrets_word(rng)])
        taken.add(title)
        expected = json_string(_random_text(rng))
        actual = expected if must_pass else json_string(_random_text(rng) + "!")
        body = (f"const expected = {expected}; const actual = {actual}; "
                f"if (actual !== expected) {{ throw new Error('expected ' + expected + ', got ' + actual); }}")
        text = f"it({json_string(title)}, function () {{ {body} }});"
        for describe in reversed(module.container):
            text = f"describe({json_string(describe)}, function () {{ {text} }});"
        texts.append(text)
        canaries.append(Canary(test_id(module.path, [*module.container, title]), module.path, must_pass))
    return canaries, texts


def json_string(text: str) -> str:
    import json

    return json.dumps(text)


def secrets_word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(6))


def _random_text(rng: random.Random) -> str:
    return " ".join(rng.choice(_FILLER_WORDS) for _ in range(rng.randint(1, 3))) + f" {rng.randint(2, 999)}"


def plan_canaries(modules: list[CanaryModule], known_ids: list[str], rng: random.Random | None = None) -> CanaryPlan:
    """One grading's canaries in ``modules``, never colliding with ``known_ids``; ``rng`` defaults
    to the system's randomness."""
    rng = rng or random.SystemRandom()
    taken = {_function(test_id) for test_id in known_ids}
    canaries: list[Canary] = []
    definitions: dict[str, list[str]] = {}
    for module in modules:
        if module.style == "describe-it":
            placed, definitions[module.path] = _script_canaries(module, rng)
            canaries.extend(placed)
            continue
        taken |= set(module.taken)
        added = module.added_lines
        double = sum(line.count('"') for line in added) >= sum(line.count("'") for line in added)
        texts = []
        # Two that must fail: a forger that sacrifices the first test it meets still meets a second.
        for must_pass in (False, False, True):
            name = _fresh_name(module.prefix, module.words, module.lengths, taken, rng)
            taken.add(name)
            body = _passing_body(rng) if must_pass else _failing_body(added, rng)
            if double:
                body = re.sub(r"'([^'\"\\]*)'", r'"\1"', body)
            texts.append(_definition(name, body, module.container))
            canaries.append(Canary("::".join([module.path, *module.container, name]), module.path, must_pass))
        definitions[module.path] = texts
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
