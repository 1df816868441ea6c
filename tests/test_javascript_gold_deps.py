"""A JavaScript PR whose fix adds a dependency to package.json, built, derived and graded for real.

padkit (mocha) pads with ``left-pad`` from the fix on: its PR adds ``left-pad@1.3.0`` to package.json
and requires it in ``lib/pad.js``. The env image is installed at the base commit, where package.json
does not name it, and the sandbox has no network: without the build's extra step the fixed code would
not load (``Cannot find module 'left-pad'``) and derivation would find no test after the fix. With
it, the package is in node_modules while package.json stays the base commit's, the PR's new test
fails before the fix and passes after it, and the gold patch (which adds the same dependency line
an agent's fix would) grades 1.0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import mine_and_build_one
from javascript_projects import fixture_git, write_files

from repo2env.patches import parse, render

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PADS = "test/pad.test.js::pad > pads to the width"
RETURNS = "test/pad.test.js::pad > returns strings"


def _git(path: Path, *args: str, stamp: str = "2023-05-02T10:00:00+00:00") -> str:
    return fixture_git(path, *args, stamp=stamp)


def _repository(path: Path) -> Path:
    """padkit at its base commit (mocha, no lock file), then one squashed PR (#1) whose fix adds
    left-pad to package.json's dependencies. ``engines`` keeps the choice on the Node 18 base."""
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    package = {"name": "padkit", "version": "1.0.0", "main": "lib/pad.js", "engines": {"node": ">=18 <20"},
               "scripts": {"test": "mocha"}, "devDependencies": {"mocha": "10.8.2"}}
    tests = ("'use strict';\nconst assert = require('assert');\nconst { pad } = require('../lib/pad');\n\n"
             "describe('pad', () => {\n  it('returns strings', () => assert.strictEqual(typeof pad(1, 3), 'string'));\n"
             "});\n")
    write_files(path, {"package.json": json.dumps(package, indent=2) + "\n", ".gitignore": "node_modules/\n",
                       "lib/pad.js": "'use strict';\nexports.pad = (text, width) => String(text);\n",
                       "test/pad.test.js": tests})
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Initial commit")
    fixed = {**package, "dependencies": {"left-pad": "1.3.0"}}
    write_files(path, {"package.json": json.dumps(fixed, indent=2) + "\n",
                       "lib/pad.js": ("'use strict';\nconst leftPad = require('left-pad');\n\n"
                                      "exports.pad = (text, width) => leftPad(String(text), width);\n"),
                       "test/pad.test.js": tests.replace("\n});\n", "\n  it('pads to the width', () => "
                                                         "assert.strictEqual(pad(1, 3), '  1'));\n});\n")})
    _git(path, "commit", "-q", "-am", "Pad to the width with left-pad (#1)\n\nPadding was ignored.",
         stamp="2023-05-03T10:00:00+00:00")
    return path


@pytest.fixture(scope="module")
def node_base(docker_client):
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.node_bootstrap import ensure_node_base_image

    return ensure_node_base_image(DockerBackend(docker_client), "18")


@pytest.fixture(scope="module")
def built(node_base, docker_client, tmp_path_factory):
    root = tmp_path_factory.mktemp("gold-deps")
    clone = _repository(root / "padkit")
    return mine_and_build_one(docker_client, clone, "acme/padkit", root / "tasks"), clone


def test_the_package_the_fix_adds_is_installed_and_package_json_is_the_base_commits(built, docker_client):
    task, clone = built
    spec = task.env_spec
    assert "package.json" in task.patch and spec.added_dependencies == {"left-pad": "1.3.0"}
    assert spec.test_runner == "mocha" and spec.package_manager == "npm"
    assert "npm install --no-save" in spec.dockerfiles["env"] and "left-pad@1.3.0" in spec.dockerfiles["env"]
    inside = docker_client.containers.run(
        spec.image, ["sh", "-c", "cd /testbed && cat package.json && echo '<>' && git status --porcelain | wc -l && "
                     "node -p \"require('left-pad')('1', 3) + '|' + require('left-pad/package.json').version\""],
        remove=True, user="1000", network_disabled=True).decode()
    package, _, rest = inside.partition("<>\n")
    assert package == _git(clone, "show", f"{task.base_commit}:package.json") + "\n"
    assert "left-pad" not in package
    assert rest.split("\n")[:2] == ["0", "  1|1.3.0"]


def test_the_task_image_records_what_its_writable_places_hold_as_a_sandbox_counts_it(built, docker_client):
    """The task image's last step counts the writable places (node_modules in /testbed) into root's
    file, which the keepalive reads instead of walking them: the count is what a sandbox of the image
    finds there (give or take the heartbeat its commands append to)."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.backends.keepalive import BASELINE_PATH
    from repo2env.runtime.images import baseline_command

    task, _ = built
    with DockerBackend(docker_client).start(task) as sandbox:
        owner = sandbox.exec(f"stat -c '%U %a' {BASELINE_PATH}").output.split()
        recorded = int(sandbox.exec(f"cat {BASELINE_PATH}").output.strip())
        counted = int(sandbox.exec(baseline_command(), user="root").output.strip())
    assert owner == ["root", "644"], owner
    assert recorded > 2**20, "node_modules (mocha) is counted"
    assert 0 <= counted - recorded <= 64 * 2**10, (recorded, counted)


def test_derivations_first_run_of_each_state_runs_the_files_whole_and_also_lists_the_ids(built, docker_client,
                                                                                           tmp_path):
    """No run only lists the ids: run 0 of each state runs the test files whole (the two at once,
    under run 0's seed), the fixed state's run 0 lists the ids, and the later runs name them."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.validate.derive import SEEDED_AFTER_RUNS, derive_tests

    task, _ = built
    logs = tmp_path / "derive"
    derivation = derive_tests(task, DockerBackend(docker_client), runs=2, hash_seeds=(0, 1), timeout_s=120,
                              log_dir=logs, parallel=True)
    assert derivation.error is None, derivation.error
    assert derivation.fail_to_pass == [PADS] and derivation.pass_to_pass == [RETURNS]
    assert sorted(path.name for path in logs.iterdir()) == sorted(
        [f"before-{run}.txt" for run in range(2)] + [f"after-{run}.txt" for run in range(SEEDED_AFTER_RUNS)])
    for state in ("before", "after"):
        first, second = ((logs / f"{state}-{run}.txt").read_text().partition("\n")[0] for run in (0, 1))
        assert "test/pad.test.js" in first and "pads to the width" not in first, first
        assert "pads to the width" in second, second
        assert "--random-seed=1 " in first + " " and "--random-seed=2 " in second + " "
    assert all(len(outcomes) == 2 for outcomes in derivation.before.values())
    assert all(len(outcomes) == SEEDED_AFTER_RUNS for outcomes in derivation.after.values())


def test_derivation_finds_the_prs_test_and_gold_grades_like_a_fix_that_adds_the_same_line(built, docker_client,
                                                                                        tmp_path):
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.validate.derive import derive_tests
    from repo2env.verify.grader import Grader

    task, _ = built
    runtime = DockerBackend(docker_client)
    derivation = derive_tests(task, runtime, runs=1, hash_seeds=(0,), timeout_s=120)
    assert derivation.error is None, derivation.error
    assert derivation.fail_to_pass == [PADS] and derivation.pass_to_pass == [RETURNS]
    derived = task.model_copy(update={"FAIL_TO_PASS": [PADS], "PASS_TO_PASS": [RETURNS]})
    with Grader(runtime, tmp_path / "grades", timeout_s=120) as grader:
        gold = grader.grade(derived, derived.patch)
        empty = grader.grade(derived, "")
        # The fix without the package.json line: the package is there all the same.
        code_only = grader.grade(derived, render(file for file in parse(derived.patch).files if file.path == "lib/pad.js"))
    assert gold.reward == 1.0 and gold.error is None and not gold.tampered, gold
    assert empty.reward == 0.0 and empty.error is None, empty
    assert code_only.reward == 1.0, code_only
