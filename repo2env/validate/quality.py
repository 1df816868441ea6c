"""Whether a task is fair: a policy can solve it from its instruction, and its tests judge the fix.

Validation proves that rewards are right, stable and varied; this module measures the rest from
what validation already holds (the gold patch, the hidden tests, the problem statement and the
reference rollouts), with no model (docs/quality.md):

1. **Interface** (:func:`find_interface`): names the fix introduces that the FAIL_TO_PASS tests use
   and the issue never names. The policy writes them into the instruction (``Task.interface``:
   names and signatures only, checked by :func:`repo2env.leakage.interface_leak`) or rejects the task.
2. **Adequacy** (:func:`assess`): near misses and stubs that still earn the full reward, tests
   that only compare a message or prose string the issue does not contain, and hunks of the gold
   patch whose removal still earns the full reward (no test needs them).
3. **Specification**: the issue's length and structure (reproduction, expected vs actual, a
   traceback) and whether it names what the tests check (a name, a file, a message).
4. **pass@k** of the policy rollouts, when a policy ran (:func:`pass_at_k`).

The syntax-tree questions (which names, which assertions) are the language's. The interface is
asked of the task's profile (:meth:`~repo2env.languages.base.LanguageProfile.introduced_interface`:
Python's from libcst, JavaScript's from tree-sitter); assertion shapes are still Python's alone
(:mod:`repo2env.languages.python_interface`), so other languages' tasks are measured on everything
else there.
"""

from __future__ import annotations

import builtins
import keyword
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from repo2env.instruction import interface_block
from repo2env.languages import get_profile
from repo2env.languages.interface import InterfaceNeed
from repo2env.languages.python_interface import PROSE_WORDS, Assertion, assertion_shapes, behaviour_names
from repo2env.languages.variants import dropped_hunk
from repo2env.leakage import InterfaceLeak, interface_leak
from repo2env.models import GradeResult, InterfaceName, QualityReport, RolloutResult, Task
from repo2env.patches import parse

#: An issue text this long (in words) counts as long enough.
MIN_STATEMENT_WORDS = 20
#: A reward at least this high is the full reward.
FULL_REWARD = 1.0 - 1e-9

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMON_NAMES = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {
    "self", "args", "kwargs", "None", "True", "False", "return", "value", "values", "name", "names", "data",
    "result", "text", "item", "items", "this", "that", "with", "from", "function", "const", "let", "var"}
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)
_INLINE_CALL = re.compile(r"`[^`\n]*\w\([^`\n]*`")
_STEPS = re.compile(r"steps to reproduce|to reproduce|reproducer|reproduction|minimal (?:example|repro)|"
                    r"^\s*(?:1[.)]|-|\*)\s.*\n\s*(?:2[.)]|-|\*)\s", re.IGNORECASE | re.MULTILINE)
_CONTRAST = re.compile(r"\binstead(?: of)?\b|\brather than\b|\bbut (?:it )?(?:got|gets|returns|gives|raises|prints)\b",
                       re.IGNORECASE)
_EXPECTED = re.compile(r"\b(?:expected|expecting|expect|should|ought to|supposed to|would like)\b", re.IGNORECASE)
_ACTUAL = re.compile(r"\b(?:actual(?:ly)?|instead|but (?:it )?(?:got|gets|returns?|gives?|raises?|prints?|shows?)|"
                     r"returns?|raises?|gives?|fails?|crash(?:es)?|breaks?|error|wrong|incorrect)\b", re.IGNORECASE)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+|"
                        r"^\s+at .+:\d+:\d+\)?$|^\s*[\w.]*(?:Error|Exception|Warning)\b:", re.MULTILINE)


@dataclass(frozen=True)
class TaskSources:
    """The code a task's quality is read from: the fix's source files before and after it, and
    the test files after the test patch (path -> text; a file missing before is new)."""

    files_before: Mapping[str, str] = field(default_factory=dict)
    files_after: Mapping[str, str] = field(default_factory=dict)
    test_files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Interface:
    """The interface a task's tests need: the names, the section that gives them (``""`` when
    none is needed, or when no rendering passes the leak check), and that check's verdict."""

    names: list[InterfaceName]
    section: str
    leak: InterfaceLeak

    @property
    def needed(self) -> bool:
        return bool(self.names)


def find_interface(task: Task, sources: TaskSources, tests: Sequence[str]) -> Interface:
    """The names ``tests`` need that the gold patch introduces and the issue never names, and the
    Interface section listing them with their signatures.

    The section is checked with :func:`~repo2env.leakage.interface_leak`: shown with its
    annotations when nothing of the fix beyond the signatures shows, else with names and
    parameters only, else not at all (``section`` empty, ``leak`` what the last try revealed).
    """
    needs = get_profile(task.language).introduced_interface(
        files_before=sources.files_before, files_after=sources.files_after, test_files=sources.test_files,
        tests=tests, statement=task.problem_statement)
    if not needs:
        return Interface([], "", InterfaceLeak(0.0, ()))
    signature_lines = [line for need in needs for line in need.header_lines]
    leak = InterfaceLeak(0.0, ())
    for bare in (False, True):
        section = "\n".join(_interface_line(need, bare=bare) for need in needs)
        leak = interface_leak(interface_block(section), gold_patch=task.patch, statement=task.problem_statement,
                              signature_lines=signature_lines)
        if not leak.leaked:
            names = [need.name if not bare else need.name.model_copy(update={"signature": need.bare_signature})
                     for need in needs]
            return Interface(names, section, leak)
    return Interface([need.name for need in needs], "", leak)


_KIND_LABELS = {"function": "function", "method": "method", "class": "class", "name": "module-level name",
                "keyword": "keyword argument", "module": "module", "cli_option": "command-line option"}


def _interface_line(need: InterfaceNeed, *, bare: bool) -> str:
    name = need.name
    signature = need.bare_signature if bare else name.signature
    label = _KIND_LABELS[name.kind]
    if name.kind == "keyword":
        keyword = name.name.rsplit("(", 1)[-1].rstrip(")")
        return f"- {label} `{keyword}` of `{signature}` ({name.path})"
    return f"- {label} `{signature}` ({name.path})"


def assess(task: Task, *, sources: TaskSources, tests: Sequence[str], rollouts: Sequence[RolloutResult],
           interface: Interface | None, interface_action: str = "none") -> QualityReport:
    """The quality block of one task: its interface (as found, with what the policy did), the
    adequacy of its tests from the rollouts, the specification signals of its issue text and,
    with policy rollouts, pass@k. ``tests``: the FAIL_TO_PASS tests the signals are read for."""
    statement = task.problem_statement
    shapes = assertion_shapes(test_files=sources.test_files, tests=tests)
    quality = QualityReport(
        interface=interface.names if interface else [],
        interface_action=interface_action if interface and interface.needed else "none",
        interface_leak=round(interface.leak.score, 4) if interface else 0.0,
        **_mutants(rollouts),
        asserting_tests=sum(1 for assertions in shapes.values() if assertions),
        string_only_tests=sorted(test for test, assertions in shapes.items() if _string_only(assertions, statement)),
        **_hunks(task.patch, rollouts),
        **_specification(task, sources, tests, shapes),
        pass_at_k=policy_pass_at_k(rollouts),
    )
    return quality.model_copy(update={"adequacy": adequacy(quality)})


def adequacy(quality: QualityReport) -> float | None:
    """The mean of what was measured: 1 - the share of surviving mutants, 1 - the share of
    string-only tests, 1 - the share of untested hunks (None: nothing was)."""
    parts = [1.0 - share for share in (quality.mutant_survival, quality.string_only_share, quality.untested_hunk_share)
             if share is not None]
    return round(statistics.fmean(parts), 4) if parts else None


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator of pass@k from ``n`` samples of which ``c`` passed (Chen et al. 2021):
    ``1 - C(n - c, k) / C(n, k)``."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def policy_pass_at_k(rollouts: Sequence[RolloutResult]) -> dict[int, float]:
    """pass@k of the policy rollouts for k = 1, 2, 4 ... and n itself; empty without any."""
    rewards = [rollout.reward for rollout in rollouts if rollout.kind == "policy"]
    n, solved = len(rewards), sum(reward >= FULL_REWARD for reward in rewards)
    if not n:
        return {}
    ks = sorted({2 ** power for power in range(n.bit_length()) if 2 ** power <= n} | {n})
    return {k: round(pass_at_k(n, solved, k), 4) for k in ks}


def _clean(grade: GradeResult | None) -> bool:
    # Rollouts read back from validation.jsonl carry no grade: their reward is all there is.
    return grade is None or (grade.error is None and not grade.tampered and grade.patch_applied)


def _mutants(rollouts: Sequence[RolloutResult]) -> dict:
    graded = [rollout for rollout in rollouts if rollout.kind in ("near_miss", "stub") and _clean(rollout.grade)]
    return {"mutants": len(graded),
            "surviving_mutants": [rollout.name for rollout in graded if rollout.reward >= FULL_REWARD]}


def _hunks(gold_patch: str, rollouts: Sequence[RolloutResult]) -> dict:
    count = sum(len(file.hunks) for file in parse(gold_patch).files if not file.is_binary)
    dropped: dict[int, bool] = {}
    for rollout in rollouts:
        found = dropped_hunk(rollout.name) if rollout.kind == "partial" else None
        if found is None or found[1] != count or not _clean(rollout.grade):
            continue
        dropped[found[0]] = dropped.get(found[0], False) or rollout.reward >= FULL_REWARD
    return {"hunks": count, "hunk_drops": len(dropped),
            "untested_hunks": sorted(hunk for hunk, untested in dropped.items() if untested)}


def _string_only(assertions: list[Assertion], statement: str) -> bool:
    """Whether a test's every assertion is an exact message or a prose string the issue lacks."""
    if not assertions:
        return False
    for assertion in assertions:
        if assertion.kind == "other" or not assertion.literals:
            return False
        literals = assertion.literals
        if assertion.kind == "string" and not any(_is_prose(literal) for literal in literals):
            return False
        if any(_said(literal, statement, pattern=assertion.kind == "message") for literal in literals):
            return False
    return True


def _is_prose(text: str) -> bool:
    return len(re.findall(r"[A-Za-z]+", text)) >= PROSE_WORDS


def _said(literal: str, statement: str, *, pattern: bool) -> bool:
    """Whether the issue text holds ``literal`` (case and spacing aside); a ``match=`` pattern is
    held when each of its fixed pieces of three or more characters is."""
    text = _normalized(statement)
    if not pattern:
        return bool(_normalized(literal)) and _normalized(literal) in text
    pieces = [piece for piece in map(_normalized, _fixed_pieces(literal)) if len(piece) >= 3]
    return bool(pieces) and all(piece in text for piece in pieces)


def _fixed_pieces(pattern: str) -> list[str]:
    """The runs of a regular expression that match only themselves (escapes read as their
    character); a class, a group, a wildcard or a quantifier ends a run."""
    pieces, current, index = [], [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            following = pattern[index + 1]
            if following.isalnum():  # \d, \s, \b ...: a class or an anchor
                pieces.append("".join(current))
                current = []
            else:
                current.append(following)
            index += 2
            continue
        if char in ".^$*+?{}[]()|":
            pieces.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    pieces.append("".join(current))
    return pieces


def _normalized(text: str) -> str:
    return " ".join(text.lower().split())


def _specification(task: Task, sources: TaskSources, tests: Sequence[str],
                   shapes: Mapping[str, list[Assertion]]) -> dict:
    statement = task.problem_statement
    words = len(re.findall(r"\w+", statement))
    traceback = _TRACEBACK.search(statement) is not None
    reproduction = (traceback or _FENCE.search(statement) is not None or ">>>" in statement
                    or _INLINE_CALL.search(statement) is not None or _STEPS.search(statement) is not None)
    expected_actual = _CONTRAST.search(statement) is not None or (
        _EXPECTED.search(statement) is not None and _ACTUAL.search(statement) is not None)
    symbols = behaviour_names(files_before=sources.files_before, files_after=sources.files_after,
                              test_files=sources.test_files, tests=tests)
    statement_words = set(re.findall(r"[A-Za-z_]\w*", statement))
    named = sorted(symbol for symbol in symbols if symbol in statement_words)
    named += sorted(token for token in _fix_identifiers(task.patch) - symbols if _names_identifier(statement, token))
    files = [file.path for file in parse(task.patch).files]
    named += [path for path in files if _names_file(statement, path)]
    messages = sorted({literal for assertions in shapes.values() for assertion in assertions
                       if assertion.kind != "other" for literal in assertion.literals if re.search(r"[A-Za-z]", literal)})
    named += [f'"{message}"' for message in messages
              if _said(message, statement, pattern=False) and not message.isidentifier()]
    checks = (words >= MIN_STATEMENT_WORDS, reproduction, expected_actual, bool(named))
    return {"statement_words": words, "reproduction": reproduction, "expected_actual": expected_actual,
            "traceback": traceback, "behaviour": len(symbols) + len(files) + len(messages),
            "named_behaviour": named, "specification": sum(checks) / len(checks)}


def _fix_identifiers(gold_patch: str) -> set[str]:
    """Identifiers on the lines the fix adds (four characters or more, keywords and builtins aside):
    the code an issue may name (a parameter, an attribute, a function it calls)."""
    tokens = {token for line in parse(gold_patch).added_lines for token in _IDENTIFIER.findall(line)}
    return {token for token in tokens if len(token) >= 4 and token not in _COMMON_NAMES}


def _names_identifier(statement: str, token: str) -> bool:
    """Whether the issue names a code identifier: one that looks like code (an underscore, a
    capital inside, a CapWord) as a word anywhere, a plain lowercase word only as code (in
    backticks, or called: ``word(``)."""
    if "_" in token.strip("_") or any(char.isupper() for char in token[1:]) or token[0].isupper():
        return re.search(rf"(?<!\w){re.escape(token)}(?!\w)", statement) is not None and not _sentence_start(
            statement, token)
    return re.search(rf"`[^`\n]*\b{re.escape(token)}\b[^`\n]*`|\b{re.escape(token)}\(", statement) is not None


def _sentence_start(statement: str, token: str) -> bool:
    """Whether a CapWord (``Fix``, ``Inherit``) only ever opens a line or a sentence: then it is prose."""
    if not (token[0].isupper() and token[1:].islower()):
        return False
    for match in re.finditer(rf"(?<!\w){re.escape(token)}(?!\w)", statement):
        if match.start() and statement[match.start() - 1] not in " \t\n":
            return False  # attached to what precedes it: click.Choice, `Choice`
        before = statement[:match.start()].rstrip(" \t")
        if before and before[-1] not in ".!?:\n#*-":
            return False
    return True


def _names_file(statement: str, path: str) -> bool:
    """A file is named by its path, its base name with extension, or (Python) its dotted module."""
    base = path.rsplit("/", 1)[-1]
    module = path.removesuffix(".py").replace("/", ".").removeprefix("src.").removeprefix("lib.")
    candidates = [path, base] + ([module] if path.endswith(".py") and "." in module else [])
    return any(re.search(rf"(?<![\w/.-]){re.escape(candidate)}(?![\w-])", statement) for candidate in candidates)
