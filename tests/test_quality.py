"""Task quality (issue 24): the interface the hidden tests need, the adequacy of the tests, the
specification signals of the issue text and pass@k, each on a fixture repository where the signal
is present and one where it is absent. The end-to-end checks on the validated demo are marked docker."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from repo2env.dataset_rows import dataset_row, task_from_row
from repo2env.instruction import agent_messages, instruction_text, interface_block
from repo2env.leakage import interface_leak
from repo2env.mine.leaks import strip_leaks
from repo2env.models import GradeResult, QualityReport, RolloutResult, Task, ValidationReport
from repo2env.validate.acceptance import AcceptancePolicy, judge, load_acceptance_policy, quality_reasons
from repo2env.validate.quality import TaskSources, assess, find_interface, pass_at_k, policy_pass_at_k
from repo2env.validate.run import interface_action

BASE_COMMIT = "0" * 40


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True,
                          check=True).stdout


def write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


class Fixture:
    """A fixture repository: a base commit, a fix and its tests as real ``git diff`` patches, the
    files validation would read, and the task they make."""

    def __init__(self, root: Path, base: Mapping[str, str], fix: Mapping[str, str], tests: Mapping[str, str],
                 statement: str) -> None:
        repo = root / "repo"
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "--initial-branch=main")
        git(repo, "config", "user.email", "t@example.com")
        git(repo, "config", "user.name", "t")
        write(repo, base)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "base")
        write(repo, fix)
        git(repo, "add", "-A")
        self.patch = git(repo, "diff", "--cached")
        git(repo, "commit", "-q", "-m", "fix")
        write(repo, tests)
        git(repo, "add", "-A")
        self.test_patch = git(repo, "diff", "--cached")
        self.sources = TaskSources({path: base[path] for path in fix if path in base}, dict(fix),
                                   {path: (root / "repo" / path).read_text() for path in tests})
        self.task = Task(instance_id="acme__calc-7", repo="acme/calc", pull_number=7, base_commit=BASE_COMMIT,
                         patch=self.patch, test_patch=self.test_patch, problem_statement=statement,
                         created_at="2024-05-01T00:00:00Z")

    def interface(self, tests: list[str]):
        return find_interface(self.task, self.sources, tests)


CALC = '''"""Arithmetic on text."""


def parse(text):
    return int(text)


class Calculator:
    def add(self, a, b):
        return a + b
'''


def calc_fixture(tmp_path: Path, fix: str, tests: str, statement: str, *, extra: Mapping[str, str] = ()) -> Fixture:
    return Fixture(tmp_path, {"src/calc/core.py": CALC, "src/calc/__init__.py": ""},
                   {"src/calc/core.py": fix, **dict(extra)}, {"tests/test_core.py": tests}, statement)


# --- 1. the interface the hidden tests need ----------------------------------------------------

NEW_FUNCTION = CALC + '''

def parse_hex(text: str, base: int = 16, *, strict: bool = False) -> int:
    """Read a hexadecimal number."""
    return int(text, base)
'''
NEW_FUNCTION_TESTS = '''from calc.core import parse_hex


def test_reads_hex():
    assert parse_hex("ff") == 255


def test_strict():
    assert parse_hex("FF", strict=True) == 255
'''


def test_a_new_function_the_issue_never_names_goes_into_the_interface(tmp_path):
    fixture = calc_fixture(tmp_path, NEW_FUNCTION, NEW_FUNCTION_TESTS, "Hexadecimal numbers should be readable too.")

    interface = fixture.interface(["tests/test_core.py::test_reads_hex", "tests/test_core.py::test_strict"])

    assert [(name.kind, name.name) for name in interface.names] == [("function", "calc.core.parse_hex")]
    name = interface.names[0]
    assert name.signature == "calc.core.parse_hex(text: str, base: int = ..., *, strict: bool = ...) -> int"
    assert name.path == "src/calc/core.py"
    assert name.tests == ["tests/test_core.py::test_reads_hex", "tests/test_core.py::test_strict"]
    assert interface.section == ("- function `calc.core.parse_hex(text: str, base: int = ..., *, strict: bool = ...)"
                                 " -> int` (src/calc/core.py)")
    # No body, no default value, no test content: nothing of the fix beyond the signature.
    assert interface.leak.leaked == () and interface.leak.score == 0.0
    for hidden in ("16", "int(text, base)", "Read a hexadecimal", '"ff"', "255"):
        assert hidden not in interface.section


def test_a_named_function_needs_no_interface_unless_a_keyword_is_unnamed(tmp_path):
    named = calc_fixture(tmp_path / "a", NEW_FUNCTION, NEW_FUNCTION_TESTS,
                         "Add `parse_hex(text, strict=False)` to read hexadecimal numbers.")
    assert named.interface(["tests/test_core.py::test_reads_hex", "tests/test_core.py::test_strict"]).names == []

    keyword_unnamed = calc_fixture(tmp_path / "b", NEW_FUNCTION, NEW_FUNCTION_TESTS,
                                   "Add `parse_hex(text)` to read hexadecimal numbers.")
    interface = keyword_unnamed.interface(["tests/test_core.py::test_strict"])
    assert [name.name for name in interface.names] == ["calc.core.parse_hex"]
    # A test that passes no keyword needs nothing the issue does not give.
    assert keyword_unnamed.interface(["tests/test_core.py::test_reads_hex"]).names == []


NEW_KEYWORD = CALC.replace("def parse(text):\n    return int(text)",
                           "def parse(text, *, allow_sign=True):\n    return int(text) if allow_sign else abs(int(text))")


def test_a_keyword_added_to_an_existing_function(tmp_path):
    tests = "from calc.core import parse\n\n\ndef test_sign():\n    assert parse('-3', allow_sign=False) == 3\n"
    fixture = calc_fixture(tmp_path / "a", NEW_KEYWORD, tests, "parse() cannot ignore the sign.")

    interface = fixture.interface(["tests/test_core.py::test_sign"])

    assert [(name.kind, name.name) for name in interface.names] == [("keyword", "calc.core.parse(allow_sign)")]
    assert interface.section == "- keyword argument `allow_sign` of `calc.core.parse(text, *, allow_sign=...)` " \
                                "(src/calc/core.py)"
    named = calc_fixture(tmp_path / "b", NEW_KEYWORD, tests, "parse() needs an `allow_sign` option.")
    assert named.interface(["tests/test_core.py::test_sign"]).names == []


def test_new_classes_methods_modules_and_module_level_names(tmp_path):
    fix = CALC.replace("        return a + b", "        return a + b\n\n    def sub(self, a, b):\n        return a - b") + '''

PRECISION = 10


class Accumulator(Calculator):
    def __init__(self, start: "int" = 0) -> None:
        self.total = start
'''
    tests = '''import calc.convert
from calc import core


def test_sub():
    assert core.Calculator().sub(3, 1) == 2


def test_accumulator():
    assert core.Accumulator(start=2).total == 2 and core.PRECISION


def test_convert():
    assert calc.convert.to_roman(4) == "IV"
'''
    fixture = calc_fixture(tmp_path, fix, tests, "The calculator cannot subtract.",
                           extra={"src/calc/convert.py": "def to_roman(number):\n    return 'IV'\n"})
    ids = ["tests/test_core.py::test_sub", "tests/test_core.py::test_accumulator", "tests/test_core.py::test_convert"]

    interface = fixture.interface(ids)

    found = {name.name: name for name in interface.names}
    assert set(found) == {"calc.core.Calculator.sub", "calc.core.Accumulator", "calc.core.PRECISION",
                          "calc.convert", "calc.convert.to_roman"}
    assert found["calc.core.Calculator.sub"].kind == "method"
    assert found["calc.core.Calculator.sub"].signature == "calc.core.Calculator.sub(self, a, b)"
    assert found["calc.core.Accumulator"].signature == (
        "calc.core.Accumulator(Calculator), constructed as Accumulator(self, start: int = ...) -> None")
    assert found["calc.core.PRECISION"].kind == "name" and "10" not in interface.section
    assert found["calc.convert"].kind == "module"
    # Every test of the module needs what the module imports at its top: it fails whole without it.
    assert found["calc.convert"].tests == sorted(ids)


def test_a_command_line_option_the_tests_pass(tmp_path):
    cli = '''import click


@click.command()
@click.option("--count", default=1)
def main(count):
    click.echo("x" * count)
'''
    fixed = cli.replace('@click.option("--count", default=1)',
                        '@click.option("--count", default=1)\n@click.option("--upper/--lower", default=False)')
    tests = '''from click.testing import CliRunner

from calc.cli import main


def test_upper():
    assert CliRunner().invoke(main, ["--upper"]).output == "X\\n"
'''
    fixture = Fixture(tmp_path / "a", {"src/calc/cli.py": cli}, {"src/calc/cli.py": fixed},
                      {"tests/test_cli.py": tests}, "The output cannot be upper case.")
    interface = fixture.interface(["tests/test_cli.py::test_upper"])
    assert [(name.kind, name.name) for name in interface.names] == [("cli_option", "--upper/--lower")]
    assert interface.section == "- command-line option `--upper/--lower` (src/calc/cli.py)"
    named = Fixture(tmp_path / "b", {"src/calc/cli.py": cli}, {"src/calc/cli.py": fixed},
                    {"tests/test_cli.py": tests}, "Add an `--upper` flag.")
    assert named.interface(["tests/test_cli.py::test_upper"]).names == []


def test_fixtures_and_helpers_of_the_test_files_count_as_the_tests_code(tmp_path):
    tests = '''import pytest

from calc import core


@pytest.fixture
def hexed():
    return core.parse_hex("10")


def check(value):
    assert core.parse_hex(value, strict=True) == 16


def test_fixture(hexed):
    assert hexed == 16


def test_helper():
    check("10")


def test_other():
    assert core.parse("1") == 1
'''
    fixture = calc_fixture(tmp_path, NEW_FUNCTION, tests, "Hexadecimal numbers.")
    interface = fixture.interface(["tests/test_core.py::test_fixture", "tests/test_core.py::test_helper",
                                   "tests/test_core.py::test_other"])
    assert [name.tests for name in interface.names] == [["tests/test_core.py::test_fixture",
                                                         "tests/test_core.py::test_helper"]]


def test_no_interface_when_nothing_is_introduced_or_a_file_does_not_parse(tmp_path):
    tests = "from calc.core import parse\n\n\ndef test_parse():\n    assert parse(' 2') == 2\n"
    fixture = calc_fixture(tmp_path / "a", CALC.replace("int(text)", "int(text.strip())"), tests, "parse fails.")
    assert fixture.interface(["tests/test_core.py::test_parse"]).names == []
    broken = calc_fixture(tmp_path / "b", NEW_FUNCTION + "\ndef (:\n", NEW_FUNCTION_TESTS, "hex")
    assert broken.interface(["tests/test_core.py::test_reads_hex"]).names == []


# --- the leak check of the Interface section ------------------------------------------------

# The fix is the signature itself: the default value 16 and the Literal annotation are what the
# issue asks for; the section may show that the parameters exist, not their values.
FIX_IN_THE_SIGNATURE = CALC + '''

def parse_number(text, base: int = 16, mode: Literal["strict", "lenient"] = "lenient"):
    return int(text, base)
'''


def test_a_default_or_annotation_that_is_the_fix_is_withheld_and_the_leak_check_confirms_it(tmp_path):
    tests = "from calc.core import parse_number\n\n\ndef test_hex():\n    assert parse_number('ff') == 255\n"
    statement = "Numbers in hexadecimal cannot be read."
    fixture = calc_fixture(tmp_path, FIX_IN_THE_SIGNATURE, tests, statement)

    interface = fixture.interface(["tests/test_core.py::test_hex"])

    assert interface.names[0].signature == "calc.core.parse_number(text, base: int = ..., mode=...)"
    assert "16" not in interface.section and "strict" not in interface.section and "Literal" not in interface.section
    assert interface.leak.score == 0.0
    # The check itself: a section that showed the default or the annotation would leak the fix.
    header = ['def parse_number(text, base: int = 16, mode: Literal["strict", "lenient"] = "lenient"):']
    for naive in ("- function `calc.core.parse_number(text, base: int = 16, mode=...)`",
                  '- function `calc.core.parse_number(text, base=..., mode: Literal["strict", "lenient"] = ...)`',
                  "- function `calc.core.parse_number(text, base=...)`: `return int(text, base)`"):
        leak = interface_leak(interface_block(naive), gold_patch=fixture.patch, statement=statement,
                              signature_lines=header)
        assert leak.score > 0, naive
    # What the issue already says is no leak.
    said = interface_leak(interface_block("- function `f(base: int = 16)`"), gold_patch=fixture.patch,
                          statement="Read numbers in base 16.", signature_lines=header)
    assert "16" not in said.leaked
    # Mining's leak score (the issue text's) does not move when the section is appended.
    cleaned = strip_leaks(statement, gold_patch=fixture.patch, repo="acme/calc", pull_number=7, commit_shas=())
    with_section = strip_leaks(statement + "\n\n" + interface_block(interface.section), gold_patch=fixture.patch,
                               repo="acme/calc", pull_number=7, commit_shas=())
    assert with_section.leak_score == cleaned.leak_score == 0.0


def test_annotations_are_dropped_when_they_would_give_the_fix_away(tmp_path):
    # The annotation is a plain type, but with what follows it in the signature it is a line the
    # fix adds in the body: the annotated rendering leaks, so the section falls back to the names.
    fix = CALC + '''

def to_table(rows: Dict[str, List[int]], width):
    return cast(
        Dict[str, List[int]],
        rows,
    )
'''
    tests = "from calc.core import to_table\n\n\ndef test_table():\n    assert to_table({}, 3) == {}\n"
    fixture = calc_fixture(tmp_path, fix, tests, "Numbers cannot become tables.")
    interface = fixture.interface(["tests/test_core.py::test_table"])
    assert interface.section == "- function `calc.core.to_table(rows, width)` (src/calc/core.py)"
    assert interface.names[0].signature == "calc.core.to_table(rows, width)"
    assert interface.leak.score == 0.0


# --- the instruction, everywhere it is shown -------------------------------------------------


def test_the_interface_section_is_in_the_instruction_the_prompt_and_a_row_read_back(tmp_path):
    fixture = calc_fixture(tmp_path, NEW_FUNCTION, NEW_FUNCTION_TESTS, "Hexadecimal numbers should be readable.")
    interface = fixture.interface(["tests/test_core.py::test_reads_hex"])
    task = fixture.task.model_copy(update={"interface": interface.section})

    text = instruction_text(task)

    assert "<interface>" in text and interface.section in text
    assert text.index("</issue>") < text.index("<interface>") < text.index("Edit the repository")
    assert agent_messages(task)[-1]["content"] == text
    row = dataset_row(task)
    assert row["interface"] == interface.section and row["prompt"][-1]["content"] == text
    assert instruction_text(task_from_row(row)) == text
    # Without an interface the instruction is what it always was.
    plain = fixture.task
    assert "<interface>" not in instruction_text(plain)
    assert instruction_text(plain).endswith("</issue>\n\nEdit the repository's files to fix it, then stop.")


def test_the_harbor_instruction_carries_the_section(tmp_path):
    from repo2env.models import EnvSpec
    from repo2env.publish.harbor import harbor_task_files

    fixture = calc_fixture(tmp_path, NEW_FUNCTION, NEW_FUNCTION_TESTS, "Hexadecimal numbers should be readable.")
    section = fixture.interface(["tests/test_core.py::test_reads_hex"]).section
    task = fixture.task.model_copy(update={"interface": section, "FAIL_TO_PASS": ["tests/test_core.py::test_reads_hex"],
                                           "env_spec": EnvSpec(image="quality/repo2env-task:acme__calc-7")})
    instruction = harbor_task_files(task, dataset="acme/quality")["instruction.md"]
    instruction = instruction.decode() if isinstance(instruction, bytes) else instruction
    assert instruction == instruction_text(task) + "\n"
    assert section in instruction


# --- 2. test adequacy --------------------------------------------------------------------------


def graded(kind: str, name: str, reward: float, **grade) -> RolloutResult:
    return RolloutResult(kind=kind, name=name, reward=reward,
                         grade=GradeResult(instance_id="acme__calc-7", reward=reward, **grade))


FILLER = "".join(f"\n\ndef helper_{number}():\n    return {number}\n" for number in range(4))
SPREAD = CALC.replace('"""Arithmetic on text."""\n', '"""Arithmetic on text."""\n' + FILLER.replace("helper", "first")).replace(
    "\n\nclass Calculator", FILLER + "\n\nclass Calculator") + FILLER.replace("helper", "more")
THREE_HUNKS = SPREAD.replace('"""Arithmetic on text."""', '"""Arithmetic on text, in any base."""').replace(
    "return int(text)", "return int(text.strip())").replace("return a + b", "return a + b + 0")


def test_surviving_mutants_untested_hunks_and_adequacy(tmp_path):
    tests = "from calc.core import parse\n\n\ndef test_parse():\n    assert parse(' 2') == 2\n"
    fixture = Fixture(tmp_path, {"src/calc/core.py": SPREAD}, {"src/calc/core.py": THREE_HUNKS},
                      {"tests/test_core.py": tests}, "parse fails on spaces.")
    ids = ["tests/test_core.py::test_parse"]
    rollouts = [graded("gold", "gold-0", 1.0), graded("null", "null-0", 0.0),
                graded("near_miss", "undo-statement-1", 1.0), graded("near_miss", "flip-compare-1", 0.0),
                graded("near_miss", "alter-return-1", 1.0, error="no junit"),  # errored: not counted
                graded("stub", "stub-none", 0.0),
                graded("partial", "hunks-1of3", 0.0),
                graded("partial", "all-but-1of3", 1.0), graded("partial", "all-but-2of3", 0.0),
                graded("partial", "all-but-3of3", 1.0)]

    quality = assess(fixture.task, sources=fixture.sources, tests=ids, rollouts=rollouts, interface=None)

    assert quality.mutants == 3 and quality.surviving_mutants == ["undo-statement-1"]
    assert quality.hunks == 3 and quality.hunk_drops == 3 and quality.untested_hunks == [1, 3]
    assert quality.asserting_tests == 1 and quality.string_only_tests == []
    assert quality.adequacy == pytest.approx(((1 - 1 / 3) + 1.0 + (1 - 2 / 3)) / 3, abs=1e-4)
    # All the variants fail and the assertion checks a value: adequate through and through.
    strong = [rollout.model_copy(update={"reward": 0.0}) if rollout.kind not in ("gold",) else rollout
              for rollout in rollouts]
    assert assess(fixture.task, sources=fixture.sources, tests=ids, rollouts=strong, interface=None).adequacy == 1.0
    # Without rollouts, messages or several hunks nothing is measured.
    empty = calc_fixture(tmp_path / "e", CALC.replace("int(text)", "int(text.strip())"), tests, "x")
    assert assess(empty.task, sources=TaskSources(), tests=ids, rollouts=[], interface=None).adequacy is None


MESSAGE_TESTS = '''import pytest
import unittest

from calc.core import parse


def test_message():
    with pytest.raises(ValueError, match=r"invalid literal for int\\(\\) with base 10"):
        parse("x")


def test_prose():
    assert str(parse("2")) == "two is the answer here"


def test_value():
    assert str(parse("2")) == "2"


def test_mixed():
    with pytest.raises(ValueError, match="cannot read the number"):
        parse("x")
    assert parse("3") == 3


def test_type_only():
    with pytest.raises(ValueError):
        parse("x")


class TestOld(unittest.TestCase):
    def test_regex(self):
        self.assertRaisesRegex(ValueError, "cannot read the number", parse, "x")
'''


def test_tests_that_only_compare_messages_the_issue_does_not_contain(tmp_path):
    ids = [f"tests/test_core.py::{name}" for name in
           ("test_message", "test_prose", "test_value", "test_mixed", "test_type_only", "TestOld::test_regex")]
    fixture = calc_fixture(tmp_path / "a", CALC.replace("int(text)", "int(text, 10)"), MESSAGE_TESTS,
                           "parse('x') raises an error nobody can read.")
    quality = assess(fixture.task, sources=fixture.sources, tests=ids, rollouts=[], interface=None)
    assert quality.asserting_tests == 6
    assert quality.string_only_tests == ["tests/test_core.py::TestOld::test_regex", "tests/test_core.py::test_message",
                                         "tests/test_core.py::test_prose"]
    # The issue that quotes the message makes the test fair.
    quoting = calc_fixture(tmp_path / "b", CALC.replace("int(text)", "int(text, 10)"), MESSAGE_TESTS,
                           "parse('x') says `invalid literal for int() with base 10`; it should say "
                           "'cannot read the number'. Two is the answer here.")
    fair = assess(quoting.task, sources=quoting.sources, tests=ids, rollouts=[], interface=None)
    assert fair.string_only_tests == []


# --- 3. specification signals ----------------------------------------------------------------

DETAILED = '''Calculator.add crashes on strings

Steps to reproduce:

```python
from calc.core import Calculator
Calculator().add("1", 2)
```

Traceback (most recent call last):
  File "<stdin>", line 2, in <module>
TypeError: can only concatenate str (not "int") to str

I expected 3, but it raises TypeError instead. See src/calc/core.py.
'''


def test_specification_signals_of_a_detailed_and_of_a_bare_issue(tmp_path):
    tests = "from calc.core import Calculator\n\n\ndef test_add():\n    assert Calculator().add('1', 2) == 3\n"
    fix = CALC.replace("return a + b", "return int(a) + int(b)")
    detailed = calc_fixture(tmp_path / "a", fix, tests, DETAILED)
    quality = assess(detailed.task, sources=detailed.sources, tests=["tests/test_core.py::test_add"], rollouts=[],
                     interface=None)
    assert (quality.reproduction, quality.expected_actual, quality.traceback) == (True, True, True)
    assert quality.statement_words >= 20
    assert quality.named_behaviour == ["Calculator", "add", "src/calc/core.py"]
    assert quality.specification == 1.0

    bare = calc_fixture(tmp_path / "b", fix, tests, "Broken")
    quality = assess(bare.task, sources=bare.sources, tests=["tests/test_core.py::test_add"], rollouts=[],
                     interface=None)
    assert (quality.reproduction, quality.expected_actual, quality.traceback, quality.named_behaviour) == (
        False, False, False, [])
    assert quality.specification == 0.0
    assert quality_reasons(load_acceptance_policy("default"), quality) == [], "the default policy measures it"
    assert quality_reasons(load_acceptance_policy("strict"), quality) == ["underspecified_statement"]


# --- 4. pass@k -----------------------------------------------------------------------------


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
    assert pass_at_k(10, 0, 10) == 0.0 and pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(5, 3, 3) == 1.0  # fewer failures than draws: some draw passes
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    rollouts = [RolloutResult(kind="policy", reward=reward) for reward in (1.0, 0.0, 0.5, 1.0, 0.0, 0.0)]
    assert policy_pass_at_k(rollouts) == {1: pytest.approx(2 / 6, abs=1e-4), 2: 0.6, 4: pytest.approx(0.9333, abs=1e-4),
                                          6: 1.0}
    assert policy_pass_at_k([RolloutResult(kind="gold", reward=1.0)]) == {}


# --- the policy acts on it -----------------------------------------------------------------


def test_the_policy_acts_on_the_quality_block():
    names = [{"kind": "function", "name": "calc.core.parse_hex", "signature": "calc.core.parse_hex(text)"}]
    needing = QualityReport(interface=names, adequacy=0.9, specification=0.75)
    default = load_acceptance_policy("default")

    def reasons(policy: AcceptancePolicy, quality: QualityReport) -> list[str]:
        rollouts = [RolloutResult(kind="gold", reward=1.0), RolloutResult(kind="null", reward=0.0)]
        return judge(policy, fail_to_pass=["t"], flaky={}, rollouts=rollouts, leak_score=0.0, quality=quality).reasons

    assert reasons(default, needing) == []
    assert reasons(default.model_copy(update={"interface": "reject"}), needing) == ["underspecified_interface"]
    assert reasons(default.model_copy(update={"interface": "ignore"}), needing) == []
    # A section the leak check withheld leaves the task underspecified.
    assert reasons(default, needing.model_copy(update={"interface_leak": 0.2})) == ["underspecified_interface"]
    assert reasons(default, needing.model_copy(update={"adequacy": 0.4})) == ["inadequate_tests"]
    assert reasons(default.model_copy(update={"min_adequacy": 0.0}), needing.model_copy(update={"adequacy": 0.0})) == []
    strict = load_acceptance_policy("strict")
    assert strict.interface == "instruction" and strict.min_adequacy > default.min_adequacy
    assert strict.min_specification > default.min_specification == 0.0


def test_interface_action_records_what_validation_did(tmp_path):
    fixture = calc_fixture(tmp_path, NEW_FUNCTION, NEW_FUNCTION_TESTS, "Hexadecimal.")
    found = fixture.interface(["tests/test_core.py::test_reads_hex"])
    none = fixture.interface(["tests/test_core.py::missing"])
    default = load_acceptance_policy("default")
    assert interface_action(default, found) == "instruction"
    assert interface_action(default.model_copy(update={"interface": "reject"}), found) == "rejected"
    assert interface_action(default.model_copy(update={"interface": "ignore"}), found) == "ignored"
    assert interface_action(default, none) == "none"


def test_the_quality_block_travels_in_validation_jsonl_and_the_dataset_row(tmp_path):
    fixture = calc_fixture(tmp_path, NEW_FUNCTION, NEW_FUNCTION_TESTS, "Hexadecimal.")
    interface = fixture.interface(["tests/test_core.py::test_reads_hex"])
    quality = assess(fixture.task, sources=fixture.sources, tests=["tests/test_core.py::test_reads_hex"],
                     rollouts=[RolloutResult(kind="policy", reward=1.0), RolloutResult(kind="policy", reward=0.0)],
                     interface=interface, interface_action="instruction")
    report = ValidationReport(instance_id="acme__calc-7", verdict="accepted", quality=quality)
    line = report.record().model_dump_json()
    assert ValidationReport.model_validate_json(line).quality == quality
    task = fixture.task.model_copy(update={"validation": report, "interface": interface.section})
    row = dataset_row(task)
    assert row["specification"] == quality.specification and row["adequacy"] == quality.adequacy
    back = task_from_row(row)
    assert back.validation.quality == quality and back.interface == interface.section
    assert back.validation.quality.pass_at_k == {1: 0.5, 2: 1.0}


# --- on the validated demo (Docker) ----------------------------------------------------------


@pytest.mark.docker
def test_the_validated_demo_has_the_quality_it_was_built_with(validated, demo_repo):
    from repo2env.jsonl import read_tasks

    folder, records = validated
    tasks = {task.pull_number: task for task in read_tasks(folder / "tasks.jsonl")}
    kept = [pull for pull in demo_repo.pulls if pull.expected_bucket == "kept" and pull.fail_to_pass]
    assert any(pull.interface for pull in kept) and any(pull.untested_hunks for pull in kept)
    for pull in kept:
        record, task = records[pull.number], tasks[pull.number]
        quality = record.quality
        assert [name.name for name in quality.interface] == list(pull.interface), pull.number
        assert quality.untested_hunks == list(pull.untested_hunks), (pull.number, record.rewards)
        # Every hunk of the demo's fixes is left out once (the default limit covers them all).
        assert quality.hunk_drops == (quality.hunks if quality.hunks > 1 else 0), pull.number
        assert quality.interface_leak == 0.0 and task.validation.quality == quality
        if pull.interface:
            assert quality.interface_action == "instruction" and task.interface
            assert interface_block(task.interface) in instruction_text(task)
            assert all(name.signature in task.interface for name in quality.interface)
        else:
            assert quality.interface_action == "none" and task.interface == ""
        # The demo's accepted tasks stay accepted: adequate tests, issues that say enough.
        if record.verdict == "accepted":
            assert quality.adequacy >= 0.5 and quality.specification >= 0.25, (pull.number, quality)
    assert (folder / "quality.png").read_bytes().startswith(b"\x89PNG")
    assert "## Task quality" in (folder / "summary.md").read_text()


@pytest.mark.docker
def test_repo_env_starts_an_episode_with_the_interface_section(validated, demo_repo, tmp_path):
    from repo2env.envs.repo_env import RepoEnv, RepoEnvConfig
    from repo2env.jsonl import read_tasks

    folder, _ = validated
    pull = next(pull for pull in demo_repo.pulls if pull.interface and not pull.stub_earns)
    task = next(task for task in read_tasks(folder / "tasks.jsonl") if task.pull_number == pull.number)
    env = RepoEnv(RepoEnvConfig(logs_dir=tmp_path / "logs"))
    try:
        instruction = env.reset(**task.model_dump())
        assert instruction == instruction_text(task) and interface_block(task.interface) in instruction
        row = dataset_row(task)
        assert env.reset(**row) is None, "the published prompt already carries the section"
    finally:
        env._close()


def test_files_of_another_language_give_no_syntax_answers_and_the_rest_is_measured(tmp_path):
    base = {"src/pad.js": "export function pad(text) {\n  return text;\n}\n"}
    fix = {"src/pad.js": "export function pad(text, width = 2) {\n  return text.padStart(width);\n}\n"
                         "export function padAll(items) {\n  return items.map(pad);\n}\n"}
    tests = {"test/pad.test.js": "import { padAll } from '../src/pad.js';\n"
                                 "it('pads all', () => expect(padAll(['a'])).toEqual([' a']));\n"}
    fixture = Fixture(tmp_path, base, fix, tests, "pad() ignores the width: `pad('a', 3)` returns 'a' instead of '  a' (padStart would do).")
    ids = ["test/pad.test.js::pads all"]
    assert fixture.interface(ids).names == []
    quality = assess(fixture.task, sources=fixture.sources, tests=ids,
                     rollouts=[graded("near_miss", "alter-return-1", 1.0)], interface=fixture.interface(ids))
    assert quality.asserting_tests == 0 and quality.mutants == 1 and quality.adequacy == 0.0
    assert quality.expected_actual and quality.reproduction and "src/pad.js" not in quality.named_behaviour
    assert quality.named_behaviour == ["padStart"]  # an identifier of the fix, named as code looks
