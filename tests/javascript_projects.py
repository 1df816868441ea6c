"""Small JavaScript projects, one per test runner, that the runner tests write, install and run.

Each project has the same cases: a passing, a failing and a skipped test, a title with the id
separators and regular-expression characters in it, a test that is never requested, a file that
fails to load, and (jest, vitest, mocha) a TypeScript test through the project's own transform
(ts-jest, vitest itself, tsx). The
expected outcomes of :data:`REQUESTED` are what every runner's parsed report must give.

Reports the runners wrote when the Docker tests ran are kept in ``tests/data/javascript_reports``
(refresh them with ``REPO2ENV_RECORD_JS_REPORTS=1 pytest tests/test_javascript_runners.py``) so
that the parsers are also tested without Docker, on real output.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from repo2env.languages.javascript.test_ids import test_id
from repo2env.outcomes import TestStatus

#: Where the projects live inside the container (each runner's project in a folder of its name).
PROJECTS_ROOT = "/home/agent/js"
REPORTS_DATA = Path(__file__).parent / "data" / "javascript_reports"

#: Versions installed from the npm registry (ones that run on Node 18, the bookworm base).
PACKAGES = {
    "jest": ["jest@29.7.0", "ts-jest@29.2.5", "typescript@5.6.3", "@types/jest@29.5.14"],
    "vitest": ["vitest@2.1.9"],
    "mocha": ["mocha@10.8.2", "tsx@4.19.2"],
    "jasmine": ["jasmine@5.5.0"],
    "ava": ["ava@6.2.0"],
    "tape": ["tape@5.9.0"],
    "node": [],
}

SPECIAL = "a :: b > c (x) [y]*"
NESTED = "nested > deep"

_DESCRIBE_SUITE = """\
{imports}
describe('format', () => {{
  {it}('pads numbers', () => {{ assert.strictEqual(String(7).padStart(2, '0'), '07'); }});
  {it}('fails', () => {{ assert.strictEqual(1, 2); }});
  {skip}('skipped one', () => {{ assert.ok(true); }});
  describe({nested!r}, () => {{
    {it}({special!r}, () => {{ console.log('ok 99 - printed by a test'); assert.ok(true); }});
  }});
}});
{it}('never requested', () => {{ assert.strictEqual(1, 2); }});
"""

_BROKEN = "require('./does-not-exist');\n"
_BROKEN_ESM = "import './does-not-exist.js';\n"

_TYPED = """\
{imports}
const add = (a: number, b: number): number => a + b;
describe('typed', () => {{ test('adds', () => {{ expect(add(1, 2)).toBe(3); }}); }});
"""

_TYPED_MOCHA = """\
import assert from 'assert';
const add = (a: number, b: number): number => a + b;
describe('typed', () => { it('adds', () => { assert.strictEqual(add(1, 2), 3); }); });
"""

_AVA = """\
const test = require('ava');
test('pads numbers', t => { t.is(String(7).padStart(2, '0'), '07'); });
test('fails', t => { t.is(1, 2); });
test.skip('skipped one', t => { t.pass(); });
test(__SPECIAL__, t => { console.log('ok 99 - printed by a test'); t.pass(); });
test('never requested', t => { t.is(1, 2); });
""".replace("__SPECIAL__", repr(SPECIAL))

_TAPE = """\
const test = require('tape');
test('pads numbers', t => { t.equal(String(7).padStart(2, '0'), '07'); t.ok(true, 'second'); t.end(); });
test('fails', t => { t.equal(1, 2); t.end(); });
test('skipped one', { skip: true }, t => { t.end(); });
test(__SPECIAL__, t => { console.log('ok 99 - printed by a test'); t.pass('fine'); t.end(); });
test('never requested', t => { t.equal(1, 2); t.end(); });
""".replace("__SPECIAL__", repr(SPECIAL))


def project_files(runner: str) -> dict[str, str]:
    """The files of ``runner``'s project (relative to its folder)."""
    package: dict = {"name": f"sample-{runner}", "version": "1.0.0", "private": True, "scripts": {}}
    files: dict[str, str] = {}
    if runner in ("jest", "vitest", "mocha", "jasmine", "node"):
        imports = {
            "jest": "const assert = require('assert');",
            "vitest": "import { describe, test, expect } from 'vitest';\nimport assert from 'assert';",
            "mocha": "const assert = require('assert');",
            "jasmine": "const assert = require('assert');",
            "node": "const { describe, it } = require('node:test');\nconst assert = require('node:assert');",
        }[runner]
        it = "it" if runner in ("mocha", "jasmine", "node") else "test"
        skip = "xit" if runner == "jasmine" else f"{it}.skip"
        files["test/format.test.js"] = _DESCRIBE_SUITE.format(imports=imports, it=it, skip=skip, nested=NESTED,
                                                              special=SPECIAL)
        files["test/broken.test.js"] = _BROKEN_ESM if runner == "vitest" else _BROKEN
    elif runner == "ava":
        files["test/format.test.js"] = _AVA
        files["test/broken.test.js"] = _BROKEN
    else:
        files["test/format.test.js"] = _TAPE
        files["test/broken.test.js"] = _BROKEN
    if runner == "jest":
        package["scripts"]["test"] = "jest --coverage"
        package["jest"] = {"testEnvironment": "node", "transform": {"^.+\\.tsx?$": "ts-jest"}}
        files["tsconfig.json"] = json.dumps({"compilerOptions": {"strict": True, "esModuleInterop": True,
                                                                 "types": ["jest"]}})
        files["test/typed.test.ts"] = _TYPED.format(imports="")
    elif runner == "vitest":
        package["type"] = "module"
        package["scripts"]["test"] = "vitest run"
        files["test/typed.test.ts"] = _TYPED.format(imports="import { describe, test, expect } from 'vitest';")
    elif runner == "mocha":
        package["scripts"]["test"] = "mocha --require test/setup.js --require tsx/cjs --reporter spec --check-leaks test/"
        files["test/setup.js"] = "process.env.SAMPLE_SETUP = '1';\n"
        files["test/typed.test.ts"] = _TYPED_MOCHA
    elif runner == "jasmine":
        package["scripts"]["test"] = "jasmine --config=jasmine.json --random=false"
        files["jasmine.json"] = json.dumps({"spec_dir": "test", "spec_files": ["**/*.test.js"], "random": True})
    elif runner == "ava":
        package["scripts"]["test"] = "ava --verbose"
    elif runner == "tape":
        package["scripts"]["test"] = "tape test/*.test.js"
    else:
        package["scripts"]["test"] = "node --test --test-reporter=spec test/"
    files["package.json"] = json.dumps(package, indent=2)
    return files


def _titles(runner: str, *titles: str) -> tuple[str, ...]:
    # ava and tape have no describe blocks: their tests are titled alone.
    return titles[-1:] if runner in ("ava", "tape") else ("format", *titles)


def requested(runner: str) -> dict[str, TestStatus]:
    """The ids the tests request of ``runner`` and the outcome each must get."""
    file = "test/format.test.js"
    special = (NESTED, SPECIAL) if runner not in ("ava", "tape") else (SPECIAL,)
    expected = {
        test_id(file, _titles(runner, "pads numbers")): TestStatus.PASSED,
        test_id(file, _titles(runner, "fails")): TestStatus.FAILED,
        test_id(file, _titles(runner, "skipped one")): TestStatus.SKIPPED,
        test_id(file, _titles(runner, *special)): TestStatus.PASSED,
        test_id(file, _titles(runner, "not a test")): TestStatus.MISSING,
        "test/broken.test.js": TestStatus.ERROR,
        test_id("test/broken.test.js", ("never", "runs")): TestStatus.ERROR,
    }
    if runner in ("jest", "vitest", "mocha"):
        expected[test_id("test/typed.test.ts", ("typed", "adds"))] = TestStatus.PASSED
    return expected


def never_requested(runner: str) -> str:
    """The id of the failing test no request names (it must not run when titles are selected)."""
    return test_id("test/format.test.js", ("never requested",))


def fixture_git(path: Path, *args: str, stamp: str) -> str:
    """git in a fixture repository the tests build: one author, the commit dates ``stamp`` (a
    task's date pin reads them), no user or system configuration."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "ada@example.com", "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp,
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", "-C", str(path), *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write ``files`` (path: text) under ``root``, making their folders."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def clone_patch(repo: Path, base: str, folder: Path, files: dict[str, str]) -> str:
    """The diff of a clone of ``repo`` (made in ``folder``) at ``base`` with ``files`` written: a
    patch an agent could submit. Git's output is kept whole (a hunk may end with a blank context line)."""
    clone = folder / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    stamp = "2025-03-05T10:00:00+00:00"
    fixture_git(clone, "checkout", "-q", base, stamp=stamp)
    write_files(clone, files)
    fixture_git(clone, "add", "-A", stamp=stamp)
    return subprocess.run(["git", "-C", str(clone), "diff", "--cached", base], check=True,
                          capture_output=True, text=True).stdout
