"""padkit, the small library the jest and vitest grading tests build: ``lib/pad.js`` with ``pad``
(which ignores the width) and ``shout`` (which forgets its "!"), and one squashed PR (#1) that
fixes both and adds their tests in jest's ``expect`` style.

Enough tests stand before the describe block's end that the hidden tests' hunk does not show the
test file's imports (the grader's canaries must find their callee without them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from javascript_projects import fixture_git, write_files

F2P = ["test/pad.test.js::pad > pads to the width", "test/pad.test.js::pad > pads numbers too",
       "test/shout.test.js::shouts a greeting"]
P2P = ["test/pad.test.js::pad > returns strings", *(f"test/pad.test.js::pad > keeps case {number}" for number in range(4))]


def library(*, esm: bool) -> tuple[str, str]:
    """lib/pad.js before the PR and after it, as an ES module or a CommonJS one."""
    export = "export " if esm else ""

    def source(pad: str, shout: str) -> str:
        text = (f"{export}function pad(text, width) {{\n  return {pad};\n}}\n\n"
                f"{export}function shout(text) {{\n  return {shout};\n}}\n")
        return text if esm else text + "\nmodule.exports = { pad, shout };\n"

    return source("String(text)", "text.toUpperCase()"), source("String(text).padStart(width)", 'text.toUpperCase() + "!"')


def _files(imports: Callable[[str], str], *, fixed: bool) -> dict[str, str]:
    """The test files: ``imports(name)`` is the head of the file that tests ``name``."""
    existing = "".join(f"  it('keeps case {number}', () => {{\n    expect(pad('Ab{number}', 1)).toBe('Ab{number}');\n"
                       "  });\n\n" for number in range(4))
    added = ("\n  it('pads to the width', () => {\n    expect(pad('abc', 6)).toBe('   abc');\n  });\n\n"
             "  it('pads numbers too', () => {\n    expect(pad(4096, 7)).toBe('   4096');\n  });\n") if fixed else ""
    files = {"test/pad.test.js": f"{imports('pad')}\ndescribe('pad', () => {{\n{existing}"
                                 "  it('returns strings', () => {\n    expect(typeof pad(1, 3)).toBe('string');\n  });\n"
                                 f"{added}}});\n"}
    if fixed:
        files["test/shout.test.js"] = (f"{imports('shout')}\ntest('shouts a greeting', () => {{\n"
                                       "  expect(shout('hello world')).toBe('HELLO WORLD!');\n});\n")
    return files


def repository(path: Path, package: dict, imports: Callable[[str], str]) -> Path:
    """padkit at ``path`` with ``package`` (its runner and module kind) and test files headed by
    ``imports(name)``; its second commit is the PR."""
    before, after = library(esm=package.get("type") == "module")
    path.mkdir()
    fixture_git(path, "init", "-q", "-b", "main", stamp="2025-03-03T10:00:00+00:00")
    write_files(path, {"package.json": json.dumps(package, indent=2) + "\n", ".gitignore": "node_modules/\n",
                       "lib/pad.js": before, **_files(imports, fixed=False)})
    fixture_git(path, "add", "-A", stamp="2025-03-03T10:00:00+00:00")
    fixture_git(path, "commit", "-q", "-m", "Initial commit", stamp="2025-03-03T10:00:00+00:00")
    write_files(path, {"lib/pad.js": after, **_files(imports, fixed=True)})
    fixture_git(path, "add", "-A", stamp="2025-03-04T10:00:00+00:00")
    fixture_git(path, "commit", "-q", "-m", "Pad to the width, shout louder (#1)\n\nPadding was ignored.",
                stamp="2025-03-04T10:00:00+00:00")
    return path


def built_task(docker_client, folder: Path, package: dict, imports: Callable[[str], str]):
    """padkit mined and built in ``folder`` on the Node 18 base: the task, with its ground truth's
    FAIL_TO_PASS and PASS_TO_PASS, and the repository."""
    from conftest import mine_and_build_one

    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.node_bootstrap import ensure_node_base_image

    ensure_node_base_image(DockerBackend(docker_client), "18")
    repo = repository(folder / "padkit", package, imports)
    task = mine_and_build_one(docker_client, repo, "acme/padkit", folder / "tasks")
    assert task.env_spec.test_runner == package["scripts"]["test"].split()[0]
    return task.model_copy(update={"FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P}), repo
