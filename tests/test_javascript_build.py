"""``repo2env build`` on JavaScript tasks, for real: a repository built in the test, mined, then its
env image (node_modules installed as the lock file pins it, on the Node 18 base) and task images
(the source as a one-commit repository owned by the agent) built through the same ladder as Python's;
a repository without a lock file climbs to the rung the registry here allows, and says which pin it used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from javascript_projects import fixture_git

from repo2env.jsonl import read_tasks
from repo2env.mine.git import GitSource
from repo2env.mine.miner import MineOptions, mine

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: ms 2.1.3, a package without dependencies: the registry's integrity hash, so that ``npm ci`` installs
#: it from whichever registry is configured (no ``resolved`` URL).
MS_INTEGRITY = "sha512-6FlzubTLZG3J2a/NVCAleEhjzq5oxgHyaCU9yYXvcLsvoVaHJq/s5xXI6/XXP6tz7R9xAOtHnSO/tXtF3WRTlA=="
LOCK = {"name": "padkit", "version": "1.0.0", "lockfileVersion": 3, "requires": True, "packages": {
    "": {"name": "padkit", "version": "1.0.0", "devDependencies": {"ms": "2.1.3"}},
    "node_modules/ms": {"version": "2.1.3", "integrity": MS_INTEGRITY, "dev": True, "license": "MIT"}}}


def _git(path: Path, *args: str, stamp: str = "2023-05-02T10:00:00+00:00") -> str:
    return fixture_git(path, *args, stamp=stamp)


def _repository(path: Path, *, locked: bool) -> Path:
    """padkit: node --test suites that require ``ms`` from node_modules; one squashed PR (#1).
    ``engines`` stops below Node 20, so the choice is 18 whichever other Node bases the engine has."""
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    package = {"name": "padkit", "version": "1.0.0", "main": "lib/pad.js", "engines": {"node": ">=18 <20"},
               "scripts": {"test": "node --test checks/"}, "devDependencies": {"ms": "2.1.3"}}
    files = {
        "package.json": json.dumps(package, indent=2) + "\n",
        ".gitignore": "node_modules/\n" if locked else "",  # without it, git must be told to ignore them
        "lib/pad.js": "'use strict';\nexports.pad = (text, width) => String(text);\n",
        "checks/pad.test.js": ("'use strict';\nconst test = require('node:test');\nconst assert = require('assert');\n"
                               "const ms = require('ms');\nconst { pad } = require('../lib/pad');\n\n"
                               "test('ms is installed', () => assert.strictEqual(ms('1s'), 1000));\n"),
    }
    if locked:
        files["package-lock.json"] = json.dumps(LOCK, indent=2) + "\n"
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Initial commit")
    (path / "lib/pad.js").write_text("'use strict';\nexports.pad = (text, width) => String(text).padStart(width);\n")
    (path / "checks/pad.test.js").write_text(files["checks/pad.test.js"]
                                             + "test('pads', () => assert.strictEqual(pad(1, 3), '  1'));\n")
    _git(path, "commit", "-q", "-am", "Pad to the width (#1)\n\nPadding was ignored.", stamp="2023-05-03T10:00:00+00:00")
    return path


@pytest.fixture(scope="module")
def node_base(docker_client):
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.node_bootstrap import ensure_node_base_image

    return ensure_node_base_image(DockerBackend(docker_client), "18")


def _build(tmp_path: Path, docker_client, *, locked: bool):
    from repo2env.pipeline.stages import build_tasks_dir
    from repo2env.runtime.backends.docker import DockerBackend

    clone = _repository(tmp_path / "padkit", locked=locked)
    tasks_dir = tmp_path / "tasks"
    mine(GitSource(clone, repo="acme/padkit"), tasks_dir, MineOptions(allow_no_issue=True))
    summary = build_tasks_dir(tasks_dir, runtime=DockerBackend(docker_client))
    (task,) = read_tasks(tasks_dir / "tasks.jsonl")
    return summary, task, clone


def _run(docker_client, image: str, command: str) -> str:
    return docker_client.containers.run(image, ["sh", "-c", command], remove=True, user="1000",
                                        network_disabled=True).decode()


def test_a_javascript_task_builds_with_the_lock_file_as_its_pin(node_base, docker_client, tmp_path):
    summary, task, clone = _build(tmp_path, docker_client, locked=True)
    spec = task.env_spec
    assert task.language == "javascript" and summary.ok == 1, spec.error
    assert spec.status == "env_ok" and spec.rung == "inferred"
    assert (spec.base, spec.node, spec.python) == ("node18", "18", "3.11")
    assert spec.package_manager == "npm" and spec.install == ["npm ci --no-audit --no-fund"]
    assert spec.dependency_pin == "lockfile package-lock.json" and spec.date_pin is None
    assert spec.test_runner == "node" and spec.package_dir == ""
    assert "/env:node18-" in spec.env_image and spec.dockerfiles["base"] == "repo2env/base:node18"
    # The env layer keeps node_modules and nothing of the repository's files.
    env_files = _run(docker_client, spec.env_image, "ls -A /testbed; ls /testbed/node_modules")
    assert env_files.split() == ["node_modules", "ms"]
    # The task layer: the base commit's files, a one-commit repository with no remote, owned by the
    # agent; node_modules installed, and ignored by git even without the repository's .gitignore.
    inside = _run(docker_client, spec.image, "cd /testbed && git rev-list --count HEAD && git remote | wc -l && "
                  "stat -c %u lib/pad.js .git && cat lib/pad.js && node -e \"console.log(require('ms')('2s'))\" && "
                  "git status --porcelain --ignored=no | wc -l")
    count, remotes, owner_file, owner_git, *rest = inside.split("\n")
    assert (count, remotes, owner_file, owner_git) == ("1", "0", "1000", "1000")
    assert "String(text);" in rest[1] and "padStart" not in inside
    assert rest[2] == "2000" and rest[3] == "0"


def test_without_a_lock_file_the_ladder_records_the_pin_it_used(node_base, docker_client, tmp_path):
    _, task, _ = _build(tmp_path, docker_client, locked=False)
    spec = task.env_spec
    assert spec.status == "env_ok", spec.error
    # The registry here is a mirror whose publication dates are its own, so `npm install --before` on
    # the commit's day finds nothing there and the ladder installs unpinned; against the real registry
    # the first rung works. Either way the task says which pin its dependencies have.
    if spec.rung == "inferred":
        assert spec.dependency_pin.startswith("before 2023-05-0") and spec.date_pin.startswith("2023-05-0")
    else:
        assert spec.rung == "unpinned" and spec.date_pin is None
        assert spec.dependency_pin == "none (the registry refused --before)"
    assert _run(docker_client, spec.image, "cd /testbed && git status --porcelain | wc -l").strip() == "0"


def test_a_task_image_an_older_repo2env_built_is_not_reused(built_js_demo, docker_client, monkeypatch):
    """A JavaScript task image ships our reporters; one whose reporters differ from this repo2env's
    (an image built before the live stream lacks outcome_stream.js) is built again, not reused."""
    from repo2env.languages.javascript.build import JavaScriptBuild
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.build import still_built
    from repo2env.runtime.images import ImageStore

    _, tasks = built_js_demo
    store = ImageStore(DockerBackend(docker_client))
    task = next(iter(tasks.values()))
    assert still_built(task, store)
    shipped = JavaScriptBuild().shipped_tools()
    assert "outcome_stream.js" in shipped
    monkeypatch.setattr(JavaScriptBuild, "shipped_tools", lambda self: {**shipped, "outcome_stream.js": "// newer"})
    assert not still_built(task, store)
