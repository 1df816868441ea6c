"""The JavaScript profile's stubs (tree-sitter): the changed functions of a fix, and only those,
get one-statement bodies; every stub applies at the base commit and parses."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from repo2env.languages import get_profile
from repo2env.languages.javascript.variants import STUB_BODIES, changed_functions, stubs


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


def test_fmtkit_stubs_apply_at_the_base(js_demo_repo, tmp_path: Path):
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


@pytest.mark.parametrize("suffix", [".js", ".mjs", ".ts", ".tsx"])
def test_every_suffix_parses(suffix):
    assert changed_functions(None, "export const f = () => 1;\n", suffix)
