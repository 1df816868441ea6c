"""The JavaScript profile's stubs (tree-sitter): the changed functions of a fix, and only those,
get one-statement bodies; every stub applies at the base commit and parses."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from repo2env.languages import get_profile
from repo2env.languages.javascript.variants import STUB_BODIES, changed_functions, near_misses, stubs


def _apply_check(repo: Path, patch: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "apply", "--check", "-"], input=patch, text=True, cwd=repo, capture_output=True)


BEFORE = """\
"use strict";

function pad(text, width) {
  return text.padStart(width);
}

const twice = (x) => x * 2;

class Counter {
  constructor(start) {
    this.value = start;
  }

  next() {
    return this.value + 1;
  }
}

module.exports = { pad, twice, Counter };
"""


def test_only_the_changed_functions_are_stubbed():
    after = BEFORE.replace("return this.value + 1;", "this.value += 1;\n    return this.value;") \
        .replace("x * 2", "x + x").replace("constructor(start) {\n    this.value = start;",
                                          "constructor(start) {\n    this.value = start || 0;")
    found = changed_functions(BEFORE, after, ".js")
    bodies = [after.encode()[start:end].decode() for start, end, _ in found]
    assert [constructor for *_, constructor in found] == [False, True, False]
    assert bodies[0] == "x + x" and "start || 0" in bodies[1] and "this.value += 1" in bodies[2]
    variants = stubs({"lib/a.js": BEFORE}, {"lib/a.js": after})
    assert [variant.name for variant in variants] == [f"stub-{style}" for style in STUB_BODIES]
    array = next(variant for variant in variants if variant.name == "stub-array")
    added = [line[1:] for line in array.patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    # The constructor returns undefined in a value style: an object returned would replace the instance.
    assert "  constructor(start) { return undefined; }" in added and "const twice = (x) => { return []; };" in added
    assert "  next() { return []; }" in added and not any("pad" in line for line in added)


def test_typescript_and_new_files():
    source = "export function area(side: number): number {\n  return side * side;\n}\n"
    (variant, *_) = stubs({}, {"src/area.ts": source}, limit=1)
    assert variant.name == "stub-undefined" and "export function area(side: number): number { return undefined; }" \
        in variant.patch
    assert stubs({"a.js": "x = (;\n"}, {"a.js": "x = (;;\n"}) == []  # a file that does not parse gives none


def test_fmtkit_variants_apply_at_the_base(js_demo_repo, tmp_path: Path):
    from repo2env.jsonl import read_tasks
    from repo2env.mine.git import GitSource
    from repo2env.mine.miner import mine

    result = mine(GitSource(js_demo_repo.path, issues_path=js_demo_repo.issues_path), tmp_path / "tasks")
    task = next(task for task in read_tasks(result.tasks_path) if task.pull_number == 16)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(js_demo_repo.path), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", task.base_commit], cwd=clone, check=True)
    paths = [line.split(" b/", 1)[1] for line in task.patch.splitlines() if line.startswith("diff --git ")]
    before = {path: (clone / path).read_text() for path in paths if (clone / path).exists()}
    subprocess.run(["git", "apply", "-"], input=task.patch, text=True, cwd=clone, check=True)
    after = {path: (clone / path).read_text() for path in paths}
    subprocess.run(["git", "checkout", "-q", "-f", task.base_commit], cwd=clone, check=True)
    subprocess.run(["git", "clean", "-qfd"], cwd=clone, check=True)
    variants = get_profile("javascript").variants().stubs(before, after)
    assert [variant.name for variant in variants] == [f"stub-{style}" for style in STUB_BODIES]
    for variant in variants:
        checked = _apply_check(clone, variant.patch)
        assert checked.returncode == 0, (variant.name, checked.stderr)
        assert "lib/random.js" in variant.patch
    near = get_profile("javascript").variants().near_misses(before, after)
    assert near and all(variant.kind == "near_miss" for variant in near)
    for variant in near:
        checked = _apply_check(clone, variant.patch)
        assert checked.returncode == 0, (variant.name, checked.stderr)


@pytest.mark.parametrize("suffix", [".js", ".mjs", ".ts", ".tsx"])
def test_every_suffix_parses(suffix):
    assert changed_functions(None, "export const f = () => 1;\n", suffix)


# --- near misses ---------------------------------------------------------------------------

NEAR_BEFORE = """\
"use strict";

function clamp(value, low, high) {
  if (value < low) return low;
  return value;
}

function isBlank(text) {
  return text.length == 0;
}

module.exports = { clamp, isBlank };
"""
NEAR_AFTER = """\
"use strict";

function clamp(value, low, high) {
  if (value < low) return low;
  if (value > high) return high;
  return value;
}

function isBlank(text) {
  if (text === null) return true;
  return text.trim().length === 0;
}

const shout = (word) => word.toUpperCase() + "!";

module.exports = { clamp, isBlank, shout };
"""
TS_BEFORE = """\
export function total(prices: Array<number>): number {
  let sum = 0;
  for (const price of prices) sum += price;
  return sum;
}
"""
TS_AFTER = """\
export function total(prices: Array<number>, limit?: number): number {
  let sum = 0;
  for (const price of prices) {
    if (limit !== undefined && sum + price > limit) break;
    sum += price;
  }
  return sum > 0 ? sum : 0;
}
"""


def _tree_repo(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"], cwd=root, check=True)
    return root


def _applied(repo: Path, patch: str, path: str) -> str:
    subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=repo, check=True)
    text = (repo / path).read_text()
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
    return text


@pytest.mark.parametrize(("path", "before", "after"), [("lib/clamp.js", NEAR_BEFORE, NEAR_AFTER),
                                                      ("src/total.ts", TS_BEFORE, TS_AFTER)])
def test_near_misses_break_the_fix_once_and_parse(path: str, before: str, after: str, tmp_path: Path):
    from repo2env.languages.javascript.syntax import parser as _parser
    from repo2env.languages.variants import diff_files

    variants = get_profile("javascript").variants().near_misses({path: before}, {path: after}, limit=50)
    kinds = {variant.name.rsplit("-", 1)[0] for variant in variants}
    assert kinds == {"undo-statement", "flip-compare", "alter-return"}, [variant.name for variant in variants]
    assert all(variant.kind == "near_miss" for variant in variants)
    assert len({variant.name for variant in variants}) == len({variant.patch for variant in variants}) == len(variants)
    gold = diff_files([path], {path: before}, {path: after})
    repo = _tree_repo(tmp_path, {path: before})
    parser = _parser("." + path.rsplit(".", 1)[-1])
    for variant in variants:
        assert variant.patch != gold, variant.name
        checked = _apply_check(repo, variant.patch)
        assert checked.returncode == 0, (variant.name, checked.stderr)
        mutated = _applied(repo, variant.patch, path)
        assert mutated not in (before, after), variant.name
        assert not parser.parse(mutated.encode()).root_node.has_error, (variant.name, mutated)
    # The same call gives the same list; a limit bounds it, the kinds taking turns.
    again = near_misses({path: before}, {path: after}, limit=50)
    assert [(variant.name, variant.patch) for variant in again] == [(variant.name, variant.patch) for variant in variants]
    assert [variant.name.rsplit("-", 1)[0] for variant in near_misses({path: before}, {path: after}, limit=3)] \
        == ["undo-statement", "flip-compare", "alter-return"]
    assert near_misses({path: before}, {path: after}, limit=0) == []


def test_near_miss_mutations_are_the_documented_ones(tmp_path: Path):
    path = "lib/clamp.js"
    repo = _tree_repo(tmp_path, {path: NEAR_BEFORE})
    mutated = {variant.name: _applied(repo, variant.patch, path)
               for variant in near_misses({path: NEAR_BEFORE}, {path: NEAR_AFTER}, limit=50)}

    def made(kind: str, old: str, new: str) -> bool:
        assert old in NEAR_AFTER
        return any(text == NEAR_AFTER.replace(old, new) for name, text in mutated.items() if name.startswith(kind))

    assert made("flip-compare", "(value > high)", "(value <= high)")
    assert made("flip-compare", "(text === null)", "(text !== null)")
    assert made("flip-compare", "length === 0", "length !== 0")
    assert made("alter-return", "return true;", "return false;")
    assert made("alter-return", "return text.trim().length === 0;", "return !(text.trim().length === 0);")
    assert made("alter-return", '(word) => word.toUpperCase() + "!"', "(word) => undefined")
    # Undone: the added guard dropped; the rewritten check back to its form before the fix.
    assert made("undo-statement", "  if (value > high) return high;\n", "")
    assert made("undo-statement", "  if (text === null) return true;\n  return text.trim().length === 0;",
                "  return text.length == 0;")
    # Lines the fix left alone are never mutated: the unchanged `value < low` stays.
    assert not made("flip-compare", "(value < low)", "(value >= low)")
    assert all("(value < low) return low;" in text for text in mutated.values())


def test_typescript_comparisons_only_not_type_arguments():
    variants = near_misses({"src/total.ts": TS_BEFORE}, {"src/total.ts": TS_AFTER}, limit=50)
    flipped = [variant.description for variant in variants if variant.name.startswith("flip-compare")]
    assert flipped == ["flip `!==` to `===` on line 4 of src/total.ts", "flip `>` to `<=` on line 4 of src/total.ts",
                       "flip `>` to `<=` on line 7 of src/total.ts"]
    assert all("Array<number>" in variant.patch and "Array>=number" not in variant.patch for variant in variants)


def test_a_fix_with_nothing_to_mutate_gives_none():
    commented = NEAR_BEFORE.replace("function isBlank(text) {", "function isBlank(text) {\n  // an empty text is blank")
    assert near_misses({"lib/clamp.js": NEAR_BEFORE}, {"lib/clamp.js": commented}) == []
    # Declaration files never run; a file that does not parse is left alone; no change, no variant.
    assert near_misses({"types/a.d.ts": "export declare function f(): number;\n"},
                       {"types/a.d.ts": "export declare function f(x?: number): number;\n"}) == []
    assert near_misses({"a.js": "x = (;\n"}, {"a.js": "x = (;;\n"}) == []
    assert near_misses({"lib/clamp.js": NEAR_BEFORE}, {"lib/clamp.js": NEAR_BEFORE}) == []
