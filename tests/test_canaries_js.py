"""Mirror canaries for JavaScript test files (describe/it runners), without Docker: drawn from a real
git diff, placed by the real restore.py, the placed file re-read with tree-sitter.

What must hold: each templated FAIL_TO_PASS test gets copies with its very call asserted against
lookalike values (same type, length and character classes), inside its own describe block at a
random place among its tests, the file still parsing; tests without a template keep the older
canaries; a mirror passing makes the reading tampered."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repo2env.languages.javascript.added_tests import added_tests
from repo2env.languages.javascript.runner import javascript_facts
from repo2env.languages.javascript.syntax import parsed
from repo2env.languages.javascript.test_ids import split_test_id
from repo2env.models import EnvSpec
from repo2env.patches import parse
from repo2env.verify.canary_maker import plan_canaries, script_canary_modules

SCRIPTS = Path(__file__).resolve().parents[1] / "repo2env" / "verify" / "scripts"

BEFORE = """\
const assert = require("assert");
const { expect } = require("chai");
const { pluralize, count } = require("../lib/plural");

describe("plural", () => {
  const irregular = { person: "people" };

  it("keeps the old behaviour", () => {
    assert.equal(pluralize("cat"), "cats");
  });
});

describe("count", () => {
  it("counts", () => {
    assert.equal(count([]), 0);
  });
});
"""

AFTER = """\
const assert = require("assert");
const { expect } = require("chai");
const { pluralize, count } = require("../lib/plural");

describe("plural", () => {
  const irregular = { person: "people" };

  it("keeps the old behaviour", () => {
    assert.equal(pluralize("cat"), "cats");
  });

  it("adds es after s and x", () => {
    const word = "bus";
    assert.equal(pluralize(word), "buses");
    assert.strictEqual(pluralize("Box"), "Boxes");
  });

  it("turns a consonant and y into ies", function () {
    expect(pluralize("city", 3)).to.equal("cities");
  });

  it("uses the irregular table", () => {
    expect(pluralize("person", 2, irregular)).toEqual(["people", 2]);
  });

  it("pluralizes in a loop", () => {
    for (const word of ["a", "b"]) {
      assert.ok(pluralize(word));
    }
  });
});

describe("count", () => {
  it("counts", () => {
    assert.equal(count([]), 0);
  });

  it("counts words", () => {
    assert.deepStrictEqual(count(["one", "two"], { words: true }), { total: 20, first: "one" });
  });
});
"""

F2P = ["test/plural.test.js::plural > adds es after s and x", "test/plural.test.js::plural > turns a consonant and y into ies",
       "test/plural.test.js::plural > uses the irregular table", "test/plural.test.js::plural > pluralizes in a loop",
       "test/plural.test.js::count > counts words"]
P2P = ["test/plural.test.js::plural > keeps the old behaviour", "test/plural.test.js::count > counts"]
PATH = "test/plural.test.js"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def snapshot(tmp_path):
    """A repository whose test file is BEFORE; the hidden tests (a real git diff) make it AFTER."""
    repo = tmp_path / "testbed"
    (repo / "test").mkdir(parents=True)
    (repo / PATH).write_text(BEFORE)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot")
    (repo / PATH).write_text(AFTER)
    hidden = _git(repo, "diff")
    _git(repo, "checkout", "-q", "--", PATH)
    return repo, hidden


def _modules(hidden: str, f2p=F2P):
    return script_canary_modules(parse(hidden), f2p, javascript_facts(EnvSpec(status="env_ok", test_runner="mocha")),
                                 [*f2p, *P2P])


def _place(repo: Path, tmp_path: Path, hidden: str, definitions: dict) -> str:
    """restore.py as grade.sh runs it for a mocha task: the hidden tests applied, the canaries placed."""
    inputs, private = tmp_path / "inputs", tmp_path / "private"
    shutil.rmtree(inputs, ignore_errors=True)
    shutil.rmtree(private, ignore_errors=True)
    inputs.mkdir()
    private.mkdir()
    shutil.copy(SCRIPTS / "restore.py", inputs / "restore.py")
    (inputs / "agent.diff").write_text("")
    (inputs / "allowed").write_text("")
    (private / "test.diff").write_text(hidden)
    (private / "canaries.json").write_text(json.dumps(definitions))
    (inputs / "grade.json").write_text(json.dumps({
        "inputs": str(inputs), "private": str(private), "gold_paths": [], "runner_pattern": "(?!)",
        "gold_references": [], "script_runner": "mocha"}))
    done = subprocess.run([sys.executable, "-I", "-S", str(inputs / "restore.py"), str(inputs / "grade.json")],
                          cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "does not read as expected" not in done.stdout, done.stdout
    placed = (repo / PATH).read_text()
    _git(repo, "checkout", "-q", "--", PATH)
    return placed


def _tests(root) -> dict[str, tuple]:
    """Every ``it(TITLE, ...)`` of a parsed file: its title -> (statement node, enclosing describe titles)."""
    found, stack = {}, [(root, ())]
    while stack:
        node, describes = stack.pop()
        if node.type == "call_expression" and node.child_by_field_name("function").text.decode() in ("it", "describe"):
            arguments = node.child_by_field_name("arguments").named_children
            title = arguments[0].named_children[0].text.decode() if arguments[0].named_children else ""
            if node.child_by_field_name("function").text.decode() == "it":
                found[title] = (node.parent, describes)
                continue
            describes = (*describes, title)
        stack.extend((child, describes) for child in node.children)
    return found


def _shape(text: str) -> str:
    return "".join("a" if c.islower() else "A" if c.isupper() else "9" if c.isdigit() else c for c in text)


def test_the_tests_added_whole_and_what_they_assert_are_read():
    hidden = "".join(f"{line}\n" for line in [
        f"diff --git a/{PATH} b/{PATH}", f"--- a/{PATH}", f"+++ b/{PATH}", "@@ -1,3 +1,8 @@",
        ' it("a", () => {', "   assert.ok(true);", " });", "+", '+it("b", () => {', '+  expect(f("x")).toBe(12);', "+});",
        '+it("c", () => expect(g()).to.not.equal("y"));'])
    (file,) = parse(hidden).files
    found = {test.title: test for test in added_tests(file)}
    assert set(found) == {"b", "c"}  # "a" is context, not added
    (literal,) = found["b"].asserted
    assert found["b"].source[literal.value[0]:literal.value[1]] == "12"
    assert [found["b"].source[start:end] for start, end in literal.arguments] == ['"x"']
    assert (found["b"].first_line, found["b"].last_line) == (4, 6) and found["b"].spaced
    assert found["c"].asserted == ()  # `.not` negates: no template
    assert found["b"].block == found["c"].block


def test_mirrors_copy_the_call_with_lookalike_values_inside_the_describe_block(snapshot, tmp_path):
    repo, hidden = snapshot
    (module,) = _modules(hidden)
    templates = {template.name: template for template in module.templates}
    # The loop asserts no literal: no template; every other FAIL_TO_PASS test is one.
    assert set(templates) == {"adds es after s and x", "turns a consonant and y into ies", "uses the irregular table",
                              "counts words"}
    ranks, checked = set(), 0
    for seed in range(12):
        plan = plan_canaries([module], [*F2P, *P2P], random.Random(seed), join_id=javascript_facts(
            EnvSpec(status="env_ok", test_runner="mocha")).join_id)
        placed = _place(repo, tmp_path, hidden, plan.definitions)
        root = parsed(placed, ".js")
        assert root is not None, placed  # the placed file parses without an error
        tests = _tests(root)
        for group in plan.exclusive:
            real_file, real_titles = split_test_id(group[0])
            if group[0] not in F2P:
                continue  # a decoy group: another call, checked as a group only
            real_node, real_describes = tests[real_titles[-1]]
            assert real_describes == real_titles[:-1]
            template = templates[real_titles[-1]]
            order = sorted([real_node.start_byte, *(tests[split_test_id(mirror)[1][-1]][0].start_byte for mirror in group[1:])])
            ranks.add(order.index(real_node.start_byte))
            for mirror in group[1:]:
                node, describes = tests[split_test_id(mirror)[1][-1]]
                # Inside the same describe block, in the file's order among its tests, never after it.
                assert describes == real_describes and real_file == PATH
                copy, original = node.text.decode(), real_node.text.decode()
                title_end = original.index(",")
                assert copy[copy.index(","):] != original[title_end:]
                differing = [(a, b) for a, b in zip(_literals(node), _literals(real_node), strict=True) if a != b]
                assert len(differing) == 1, (copy, original)
                value, real_value = differing[0]
                assert len(value) == len(real_value) and _shape(value) == _shape(real_value), differing
                # The very call: the copy is the original but for its title and that one value.
                assert copy.replace(value, real_value)[copy.index(","):] == original[title_end:]
                assert mirror in plan.must_fail or _changed(value, real_value) < 3
                checked += 1
        assert template is not None
    assert checked >= 12 * 4 * 2
    assert ranks == {0, 1, 2}, "the real test comes first, second or last among its copies"


def _literals(statement) -> list[str]:
    """The outermost literals of a test statement after its title."""
    found, stack = [], [statement.named_children[0].child_by_field_name("arguments").named_children[1]]
    while stack:
        node = stack.pop()
        if node.type in ("string", "number", "array", "object"):
            found.append(node.text.decode())
            continue
        stack.extend(reversed(node.children))
    return found


def _changed(a: str, b: str) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


def test_a_test_that_uses_its_own_locals_is_copied_whole_and_every_name_resolves(snapshot, tmp_path):
    repo, hidden = snapshot
    (module,) = _modules(hidden, F2P[:1])
    plan = plan_canaries([module], [*F2P, *P2P], random.Random(5), join_id=javascript_facts(
        EnvSpec(status="env_ok", test_runner="mocha")).join_id)
    placed = _place(repo, tmp_path, hidden, plan.definitions)
    assert plan.exclusive[0][0] == F2P[0]
    for mirror in plan.exclusive[0][1:]:
        node, describes = _tests(parsed(placed, ".js"))[split_test_id(mirror)[1][-1]]
        # The local the call uses comes with it, in the block where the file's own names are defined.
        assert 'const word = "bus";\n' in node.text.decode() and "pluralize(word)" in node.text.decode()
        assert describes == ("plural",)


def test_files_without_templates_keep_the_older_canaries(snapshot, tmp_path):
    repo, hidden = snapshot
    (module,) = _modules(hidden, [F2P[3]])  # the loop alone
    assert module.templates == []
    plan = plan_canaries([module], [*F2P, *P2P], random.Random(2), join_id=javascript_facts(
        EnvSpec(status="env_ok", test_runner="mocha")).join_id)
    assert len(plan.must_fail) == 2 and len(plan.must_pass) == 1 and plan.exclusive == ()
    placed = _place(repo, tmp_path, hidden, plan.definitions)
    assert parsed(placed, ".js") is not None and placed.startswith(AFTER.rstrip("\n"))


def test_a_typescript_file_gets_mirrors_too():
    hidden = "".join(f"{line}\n" for line in [
        "diff --git a/test/d.test.ts b/test/d.test.ts", "new file mode 100644", "--- /dev/null", "+++ b/test/d.test.ts",
        "@@ -0,0 +1,5 @@", '+import { parse } from "../lib/d";', '+describe("parse", () => {',
        '+  it("reads minutes", () => { expect(parse("90m" as string)).toBe(5400000); });',
        '+  it("reads hours", () => { expect(parse("2h")).toBe(7200000); });', "+});"])
    facts = javascript_facts(EnvSpec(status="env_ok", test_runner="jest"))
    f2p = ["test/d.test.ts::parse > reads minutes", "test/d.test.ts::parse > reads hours"]
    (module,) = script_canary_modules(parse(hidden), f2p, facts, f2p)
    assert {template.name for template in module.templates} == {"reads minutes", "reads hours"}
    plan = plan_canaries([module], f2p, random.Random(1), join_id=facts.join_id)
    assert len(plan.exclusive) >= 2 and all(block["at"] in (2, 3, 4) for block in plan.definitions["test/d.test.ts"]
                                            if block["at"] is not None)


#: What the placed file needs to run under Node without a runner: a fixed library, chai's two
#: assertion styles the file uses, and describe/it globals that report each test's outcome by
#: its full title (the error's name when it failed).
LIBRARY = """\
function pluralize(word, count = 2, table = undefined) {
  if (table && table[word]) return [table[word], count];
  if (/(s|x)$/i.test(word)) return word + "es";
  if (/[^aeiou]y$/.test(word)) return word.slice(0, -1) + "ies";
  return word + "s";
}
function count(items, options) { return options ? { total: 20, first: items[0] } : items.length; }
module.exports = { pluralize, count };
"""
CHAI = """\
const assert = require("assert");
exports.expect = (actual) => ({ toBe: (v) => assert.strictEqual(actual, v), toEqual: (v) => assert.deepStrictEqual(actual, v),
  to: { equal: (v) => assert.strictEqual(actual, v) } });
"""
HARNESS = """\
const path = [], queue = [], results = {};
global.describe = (title, body) => { path.push(title); body(); path.pop(); };
global.it = (title, body) => queue.push([[...path, title].join(" > "), body]);
require(process.argv[2]);
for (const [title, body] of queue) {
  try { body(); results[title] = "passed"; } catch (error) { results[title] = error.name; }
}
console.log(JSON.stringify(results));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")
def test_the_placed_file_runs_and_every_mirror_fails_on_its_value_alone(snapshot, tmp_path):
    # Under a correct library the task's tests pass and every mirror fails by an AssertionError (its
    # value), never a ReferenceError (a name that does not resolve where it was placed).
    repo, hidden = snapshot
    (module,) = _modules(hidden)
    (tmp_path / "harness.js").write_text(HARNESS)
    for seed in range(4):
        plan = plan_canaries([module], [*F2P, *P2P], random.Random(seed), join_id=javascript_facts(
            EnvSpec(status="env_ok", test_runner="mocha")).join_id)
        placed = _place(repo, tmp_path, hidden, plan.definitions)  # restore.py reverts what is not the snapshot's
        (repo / "lib").mkdir(exist_ok=True)
        (repo / "lib" / "plural.js").write_text(LIBRARY)
        (repo / "node_modules" / "chai").mkdir(parents=True, exist_ok=True)
        (repo / "node_modules" / "chai" / "index.js").write_text(CHAI)
        (repo / "test" / "placed.test.js").write_text(placed)
        ran = subprocess.run(["node", str(tmp_path / "harness.js"), str(repo / "test" / "placed.test.js")],
                             capture_output=True, text=True, timeout=60, check=True)
        outcomes = {f"{PATH}::{title}": outcome for title, outcome in json.loads(ran.stdout).items()}
        assert {outcomes[test_id] for test_id in F2P + P2P + list(plan.must_pass)} == {"passed"}, outcomes
        mirrors = [test_id for group in plan.exclusive if group[0] in F2P for test_id in group[1:]]
        assert mirrors and {outcomes[test_id] for test_id in mirrors} == {"AssertionError"}, outcomes
        assert all(outcomes[test_id] != "passed" for test_id in plan.must_fail)
        for group in plan.exclusive:
            assert sum(outcomes[test_id] == "passed" for test_id in group) <= 1
            assert not {outcomes[test_id] for test_id in group} - {"passed", "AssertionError"}, outcomes


# --- vitest: the test files import describe/it ------------------------------------------------


def _new_file(path: str, lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in [f"diff --git a/{path} b/{path}", "new file mode 100644", "--- /dev/null",
                                            f"+++ b/{path}", f"@@ -0,0 +1,{len(lines)} @@", *(f"+{line}" for line in lines)])


@pytest.mark.parametrize(("imports", "test", "describe"), [
    ("import { describe, it, expect } from 'vitest';", "it", "describe"),
    ('import { expect, test } from "vitest";', "test", ""),
    ("import { describe as group, test as check, expect } from 'vitest';", "check", "group"),
    ("import * as vt from 'vitest';", "vt.it", "vt.describe"),
    ("import type { Mock } from 'vitest';\nimport { describe, it } from './helpers';", "", ""),
])
def test_the_names_a_vitest_file_imports_are_read(imports, test, describe):
    from repo2env.languages.javascript.test_callees import imported_callees

    (file,) = parse(_new_file("test/a.test.ts", [*imports.splitlines(), "it('x', () => {});"])).files
    found = imported_callees(file, "vitest")
    assert (found.test, found.describe) == (test, describe)


VITEST_LIBRARY = "export const pluralize = (word) => (/(s|x)$/.test(word) ? word + 'es' : word + 's');\n"
#: A stand-in for vitest that exports describe/it/test/expect and records each test's outcome: a
#: name the placed file uses without importing it throws a ReferenceError.
FAKE_VITEST = """\
export const queue = [];
const path = [];
export const describe = (title, body) => { path.push(title); body(); path.pop(); };
export const it = (title, body) => { queue.push([[...path, title].join(" > "), body]); };
export const test = it;
export const expect = (actual) => ({ toBe: (value) => { if (actual !== value) { const error = new Error("no");
  error.name = "AssertionError"; throw error; } } });
"""
VITEST_HARNESS = """\
const { queue } = await import("vitest");
await import(process.argv[2]);
const results = {};
for (const [title, body] of queue) {
  try { body(); results[title] = "passed"; } catch (error) { results[title] = error.name; }
}
console.log(JSON.stringify(results));
"""
_VITEST_F2P = ["test/plural.test.js::plural > adds es after s", "test/plural.test.js::plural > adds es after x"]
_ADDED = ["  it('adds es after s', () => { expect(pluralize('bus')).toBe('buses'); });",
          "  it('adds es after x', () => { expect(pluralize('box')).toBe('boxes'); });"]


def _vitest_styles() -> dict[str, tuple[str, list[str]]]:
    """Hidden tests in each common style: (the file before them, or '' for a new file; the file after)."""
    head = ["import { describe, it, expect } from 'vitest';", "import { pluralize } from '../lib/plural.js';", ""]
    existing = [*head, "describe('plural', () => {", *[f"  it('keeps {n}', () => {{ expect(pluralize('cat')).toBe('cats'); }});"
                                                     for n in range(4)], "});"]
    top_level = ["import { test, expect } from 'vitest';", "import { pluralize } from '../lib/plural.js';", "",
                 *(line.strip().replace("it(", "test(", 1) for line in _ADDED)]
    return {
        "describe-it imported": ("", [*head, "describe('plural', () => {", *_ADDED, "});"]),
        "test imported, top level": ("", top_level),
        "imports not in the hunk": ("\n".join(existing) + "\n", [*existing[:-1], *_ADDED, "});"]),
    }


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")
@pytest.mark.parametrize("style", list(_vitest_styles()))
def test_vitest_canaries_call_only_the_names_the_file_has(tmp_path, style):
    # Under the fixed library the task's tests and the must-pass canary pass and every must-fail
    # canary fails on its value: none calls a name its file does not import.
    before, after = _vitest_styles()[style]
    f2p = [test_id if "top level" not in style else test_id.replace("plural > ", "") for test_id in _VITEST_F2P]
    repo = tmp_path / "testbed"
    (repo / "test").mkdir(parents=True)
    (repo / PATH).write_text(before)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot", "--allow-empty")
    (repo / PATH).write_text("\n".join(after) + "\n")
    _git(repo, "add", "-A")
    hidden = _git(repo, "diff", "--cached")
    _git(repo, "reset", "-q", "--hard")
    facts = javascript_facts(EnvSpec(status="env_ok", test_runner="vitest"))
    (module,) = script_canary_modules(parse(hidden), f2p, facts, f2p)
    for seed in range(3):
        plan = plan_canaries([module], f2p, random.Random(seed), join_id=facts.join_id)
        assert plan.must_pass and len(plan.must_fail) >= 2
        placed = _place(repo, tmp_path, hidden, plan.definitions)  # restore.py reverts what is not the snapshot's
        (repo / "lib").mkdir(exist_ok=True)
        (repo / "lib" / "plural.js").write_text(VITEST_LIBRARY)
        (repo / "node_modules" / "vitest").mkdir(parents=True, exist_ok=True)
        (repo / "node_modules" / "vitest" / "index.js").write_text(FAKE_VITEST)
        (repo / "node_modules" / "vitest" / "package.json").write_text('{"type": "module", "main": "index.js"}')
        (repo / "package.json").write_text('{"type": "module"}')
        (repo / "harness.js").write_text(VITEST_HARNESS)
        (repo / "test" / "placed.test.js").write_text(placed)
        ran = subprocess.run(["node", str(repo / "harness.js"), str(repo / "test" / "placed.test.js")],
                             cwd=repo, capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
        outcomes = {f"{PATH}::{title}": outcome for title, outcome in json.loads(ran.stdout).items()}
        assert {outcomes.get(test_id) for test_id in [*f2p, *plan.must_pass]} == {"passed"}, (outcomes, placed)
        assert {outcomes.get(test_id) for test_id in plan.must_fail} <= {"AssertionError", "Error"}, (outcomes, placed)


def test_a_vitest_file_with_nowhere_to_place_a_canary_fails_closed(snapshot):
    # The hidden tests change an existing test in place, below the imports: no test added whole, no
    # import shown. The file's must-pass canary is never placed, so every grading is tampered.
    from repo2env.verify.canary_maker import UNPLACEABLE

    hidden = "".join(f"{line}\n" for line in [
        f"diff --git a/{PATH} b/{PATH}", f"--- a/{PATH}", f"+++ b/{PATH}", "@@ -9,3 +9,3 @@", '  it("counts", () => {',
        "-    expect(count([])).toBe(0);", "+    expect(count([])).toBe(1);", "  });"])
    facts = javascript_facts(EnvSpec(status="env_ok", test_runner="vitest"))
    f2p = [f"{PATH}::count > counts"]
    (module,) = script_canary_modules(parse(hidden), f2p, facts, f2p)
    plan = plan_canaries([module], f2p, random.Random(1), join_id=facts.join_id)
    assert plan.definitions[PATH] == [] and plan.must_fail == ()
    assert plan.must_pass == (f"{PATH}::{UNPLACEABLE}",) and plan.unplaced == (PATH,)
    # Its report says nothing of the canary (it never ran): the grading is refused all the same.
    from repo2env.outcomes import TestStatus
    from repo2env.verify.reading import read_script_run
    from repo2env.verify.tamper import outcomes_verdict

    assert outcomes_verdict({f2p[0]: TestStatus.PASSED}, plan) == f"no canary could be placed in {PATH}"
    from repo2env.verify.trailer import TRAILER

    output = f"ok\n\n{TRAILER} 000 {0:012d}\n"
    reading = read_script_run(exit_code=0, truncated=False, timed_out=False, output=output, test_ids=f2p,
                              run_ids=[*f2p, *plan.must_pass], plan=plan, timeout_s=60,
                              read_reports=lambda texts: {f2p[0]: TestStatus.PASSED})
    assert reading.tampered and reading.tests == {f2p[0]: TestStatus.ERROR}
