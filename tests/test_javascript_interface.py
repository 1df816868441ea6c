"""The JavaScript profile's interface (tree-sitter): what the fix introduces that the hidden tests
use and the issue never names, rendered as signatures without bodies, through validation's
quality.find_interface on real git patches."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from javascript_projects import write_files

from repo2env.instruction import interface_block
from repo2env.languages import get_profile
from repo2env.leakage import interface_leak
from repo2env.models import Task
from repo2env.validate.quality import TaskSources, find_interface

SLUG = '''"use strict";

function slugify(text, options = {}) {
  const words = text.trim().toLowerCase().split(/\\s+/);
  return words.join("-");
}

module.exports = { slugify };
'''
SLUG_FIXED = '''"use strict";

function slugify(text, options = {}) {
  const separator = options.separator ?? "-";
  const words = text.trim().toLowerCase().split(/\\s+/);
  return words.join(separator);
}

function truncateSlug(slug, { maxLength = 40, ellipsis } = {}) {
  if (slug.length <= maxLength) return slug;
  return slug.slice(0, maxLength).replace(/-+$/, "") + (ellipsis ? "\u2026" : "");
}

module.exports = { slugify, truncateSlug };
'''
SLUG_TESTS = '''const assert = require("assert");
const { slugify, truncateSlug } = require("../lib/slug");

describe("slugify", () => {
  it("joins words with dashes", () => {
    assert.strictEqual(slugify("Hello World"), "hello-world");
  });

  it("joins words with a custom separator", () => {
    assert.strictEqual(slugify("Hello World", { separator: "_" }), "hello_world");
  });

  describe("long slugs", () => {
    beforeEach(() => {});

    it("are cut without a trailing dash", () => {
      assert.strictEqual(truncateSlug("ab-cd", { maxLength: 3 }), "ab");
    });
  });
});
'''
SEPARATOR_TEST = "test/slug.test.js::slugify > joins words with a custom separator"
TRUNCATION_TEST = "test/slug.test.js::slugify > long slugs > are cut without a trailing dash"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _task_and_sources(root: Path, base: Mapping[str, str], fix: Mapping[str, str], tests: Mapping[str, str],
                      statement: str) -> tuple[Task, TaskSources]:
    """A repository with a base commit, the fix and its tests as real ``git diff`` patches."""
    repo = root / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    write_files(repo, {"package.json": '{"name": "slugs", "version": "1.0.0"}\n', **base})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    write_files(repo, fix)
    _git(repo, "add", "-A")
    patch = _git(repo, "diff", "--cached")
    _git(repo, "commit", "-qm", "fix")
    write_files(repo, tests)
    _git(repo, "add", "-A")
    test_patch = _git(repo, "diff", "--cached")
    task = Task(instance_id="acme__slugs-3", repo="acme/slugs", pull_number=3, base_commit="0" * 40, patch=patch,
                test_patch=test_patch, problem_statement=statement, created_at="2024-05-01T00:00:00Z",
                language="javascript")
    sources = TaskSources({path: base[path] for path in fix if path in base}, dict(fix),
                          {path: (repo / path).read_text() for path in tests})
    return task, sources


def test_a_new_exported_function_the_issue_never_names_is_given_as_a_signature(tmp_path: Path):
    task, sources = _task_and_sources(tmp_path, {"lib/slug.js": SLUG}, {"lib/slug.js": SLUG_FIXED},
                                      {"test/slug.test.js": SLUG_TESTS},
                                      "Long slugs should be cut to a maximum length, without a dash at the end.")

    interface = find_interface(task, sources, [TRUNCATION_TEST])

    assert [(name.kind, name.name, name.path) for name in interface.names] == [
        ("function", "truncateSlug", "lib/slug.js")]
    assert interface.names[0].signature == "truncateSlug(slug, { maxLength, ellipsis } = ...)"
    assert interface.names[0].tests == [TRUNCATION_TEST]
    assert interface.section == "- function `truncateSlug(slug, { maxLength, ellipsis } = ...)` (lib/slug.js)"
    # No body, no default value, no test content; the leak check finds nothing of the fix beyond it.
    for hidden in ("40", "slice", "replace", "\u2026", "maxLength: 3", '"ab"', "{\n"):
        assert hidden not in interface.section, hidden
    assert interface.leak.leaked == () and interface.leak.score == 0.0
    leak = interface_leak(interface_block(interface.section), gold_patch=task.patch, statement=task.problem_statement,
                          signature_lines=["function truncateSlug(slug, { maxLength = 40, ellipsis } = {}) {"])
    assert not leak.leaked


def test_what_the_issue_names_is_no_interface(tmp_path: Path):
    task, sources = _task_and_sources(tmp_path, {"lib/slug.js": SLUG}, {"lib/slug.js": SLUG_FIXED},
                                      {"test/slug.test.js": SLUG_TESTS},
                                      "Add `truncateSlug(slug, { maxLength })`, and a `separator` option to slugify.")

    interface = find_interface(task, sources, [SEPARATOR_TEST, TRUNCATION_TEST])

    assert interface.names == [] and interface.section == ""


def test_a_new_option_key_of_an_existing_function(tmp_path: Path):
    task, sources = _task_and_sources(tmp_path, {"lib/slug.js": SLUG}, {"lib/slug.js": SLUG_FIXED},
                                      {"test/slug.test.js": SLUG_TESTS}, "Slugs should not always use dashes.")

    interface = find_interface(task, sources, [SEPARATOR_TEST])

    # Only what the separator test uses: truncateSlug is imported at the top of its file, so every
    # test of the file needs it, as a module-level import in Python.
    assert [(name.kind, name.name, name.tests) for name in interface.names] == [
        ("keyword", "slugify(separator)", [SEPARATOR_TEST]), ("function", "truncateSlug", [SEPARATOR_TEST])]
    assert interface.section.splitlines()[0] == "- keyword argument `separator` of `slugify(text, options = ...)` (lib/slug.js)"
    assert '"-"' not in interface.section and interface.leak.score == 0.0


ESM_BEFORE = '''export class Table {
  constructor(rows) {
    this.rows = rows;
  }

  render(): string {
    return this.rows.join("\\n");
  }
}
'''
ESM_AFTER = '''export class Table {
  constructor(rows: string[][], options: { align?: "left" | "right" } = {}) {
    this.rows = rows;
    this.options = options;
  }

  render(): string {
    return this.rows.map((row) => this.pad(row)).join("\\n");
  }

  pad(row: Array<string>, width?: number): string {
    return row.join(" ".padEnd(width ?? 1));
  }

  static parse(text: string, mode: "csv" | "tsv"): Table {
    return new Table(text.split("\\n").map((line) => line.split(mode === "csv" ? "," : "\\t")));
  }
}

const columnWidth = (cells: string[]): number => Math.max(...cells.map((cell) => cell.length));
export { columnWidth as widthOf };
'''
ESM_TESTS = '''import { Table, widthOf } from "../src/table";

describe("Table", () => {
  test("parses csv", () => {
    expect(Table.parse("a,b", "csv").pad(["a"], 2)).toBe("a");
  });
  test.each([[["ab"], 2]])("measures %s", (cells, width) => {
    expect(widthOf(cells)).toBe(width);
  });
});
'''


def test_typescript_methods_and_es_exports(tmp_path: Path):
    task, sources = _task_and_sources(tmp_path, {"src/table.ts": ESM_BEFORE}, {"src/table.ts": ESM_AFTER},
                                      {"test/table.test.ts": ESM_TESTS}, "Tables cannot be read from text.")

    # The second test's title is computed at run time: its whole file is read.
    interface = find_interface(task, sources, ["test/table.test.ts::Table > parses csv",
                                               "test/table.test.ts::Table > measures ab"])

    assert [(name.kind, name.name, name.signature) for name in interface.names] == [
        ("method", "Table.pad", "Table.pad(row: Array<string>, width?: number): string"),
        ("method", "Table.parse", "static Table.parse(text: string, mode): Table"),
        ("function", "widthOf", "widthOf(cells: string[]): number"),
    ]
    # A literal type ("csv" | "tsv") may be the fix: never shown.
    assert '"csv"' not in interface.section and interface.leak.score == 0.0


def test_a_profile_without_a_parser_finds_no_interface_and_python_is_unchanged():
    from repo2env.languages.base import LanguageProfile

    assert LanguageProfile.introduced_interface(get_profile("javascript"), files_before={}, files_after={"a.js": ""},
                                                test_files={}, tests=[], statement="") == []
    python = get_profile("python").introduced_interface(
        files_before={"calc.py": "def a():\n    pass\n"},
        files_after={"calc.py": "def a():\n    pass\n\n\ndef b(x):\n    return x\n"},
        test_files={"tests/test_calc.py": "from calc import b\n\n\ndef test_b():\n    assert b(1) == 1\n"},
        tests=["tests/test_calc.py::test_b"], statement="b is missing")
    assert python == []  # the statement names b
    # A JavaScript change gives Python's reader nothing, and the other way round.
    assert get_profile("javascript").introduced_interface(
        files_before={}, files_after={"calc.py": "def b(x):\n    return x\n"},
        test_files={"tests/test_calc.py": "from calc import b\n\n\ndef test_b():\n    assert b(1) == 1\n"},
        tests=["tests/test_calc.py::test_b"], statement="") == []


COMMONJS_BEFORE = '''exports.pad = function pad(text, width) {
  return String(text).padStart(width);
};
'''
COMMONJS_AFTER = COMMONJS_BEFORE + '''
exports.center = function (text, width, { fill } = {}) {
  const left = Math.floor((width - text.length) / 2);
  return exports.pad(text, left + text.length).padEnd(width, fill || " ");
};
'''
COMMONJS_TESTS = '''const assert = require("assert");
const text = require("../lib/text");

describe("pad", () => {
  it("pads", () => {
    assert.strictEqual(text.pad("a", 2), " a");
  });
});

describe("center", () => {
  let centered;
  beforeEach(() => {
    centered = text.center("a", 3);
  });

  it("centers", () => {
    assert.strictEqual(centered, " a ");
  });
});
'''


def test_commonjs_exports_and_what_a_describe_hook_uses(tmp_path: Path):
    task, sources = _task_and_sources(tmp_path, {"lib/text.js": COMMONJS_BEFORE}, {"lib/text.js": COMMONJS_AFTER},
                                      {"test/text.test.js": COMMONJS_TESTS}, "Text cannot be centred yet.")

    interface = find_interface(task, sources, ["test/text.test.js::pad > pads", "test/text.test.js::center > centers"])

    # Only the test under the describe whose beforeEach calls it needs it.
    assert [(name.signature, name.tests) for name in interface.names] == [
        ("center(text, width, { fill } = ...)", ["test/text.test.js::center > centers"])]
    assert "exports.center = function (text, width, { fill } = {}) {" in task.patch
    assert interface.leak.score == 0.0
