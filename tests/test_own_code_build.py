"""Builds that must run the project's own code, with the files its install generates and its real
version: a setuptools-scm project, a project pytest itself depends on, and one whose install puts
another distribution's code under its import name."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from repo2env.jsonl import read_tasks, write_jsonl
from repo2env.languages.python.spec.overrides import EnvOverride
from repo2env.models import Task
from repo2env.pipeline.stages import build_tasks_dir
from repo2env.runtime.backends.docker import DockerBackend
from repo2env.runtime.build import BuildOptions
from repo2env.runtime.images import image_namespace

pytestmark = pytest.mark.docker

SCM_PYPROJECT = """\
    [build-system]
    requires = ["setuptools>=64", "setuptools-scm>=7"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "{name}"
    dynamic = ["version"]
    requires-python = ">=3.11"
    classifiers = ["Programming Language :: Python :: 3.11"]

    [tool.setuptools_scm]
    write_to = "src/{module}/_version.py"
"""


def _git(repo: Path, *args: str, date: str = "2026-10-05T10:00:00Z") -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def _repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    return path


def _commit(repo: Path, files: dict[str, str], message: str, *, tag: str | None = None) -> str:
    for name, content in files.items():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(content))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)
    if tag:
        _git(repo, "tag", "-a", tag, "-m", tag)
    return _git(repo, "rev-parse", "HEAD").strip()


def _scm_version(repo: Path, commit: str) -> str:
    """What setuptools-scm computes on the full history (the miner records it as Task.scm_version)."""
    described = subprocess.run(["git", "-C", str(repo), "describe", "--tags", "--long", "--match", "v*", commit],
                               capture_output=True, text=True)
    if described.returncode != 0:
        return ""
    tag, distance, node = described.stdout.strip().rsplit("-", 2)
    if distance == "0":
        return tag.removeprefix("v")
    major, minor, patch = tag.removeprefix("v").split(".")
    return f"{major}.{minor}.{int(patch) + 1}.dev{distance}+{node}"


def _tasks_folder(tmp_path: Path, repo: Path, name: str, bases: list[str], test_file: str) -> Path:
    folder = tmp_path / "tasks"
    tasks = [Task(instance_id=f"{name.replace('/', '__')}-{number}", repo=name, pull_number=number,
                  base_commit=base, scm_version=_scm_version(repo, base), patch="",
                  test_patch=f"diff --git a/{test_file} b/{test_file}\n", problem_statement="x",
                  created_at="2026-10-05T10:00:00Z")
             for number, base in enumerate(bases, start=1)]
    write_jsonl(folder / "tasks.jsonl", tasks)
    (folder / "source.json").write_text(json.dumps({"repo": name, "clone_path": str(repo), "source": "test"}))
    return folder


def _layer_mb(client, task: Task) -> float:
    image = client.images.get(task.env_spec.image)
    env = client.images.get(task.env_spec.env_image)
    return (image.attrs["Size"] - env.attrs["Size"]) / 2**20


def test_setuptools_scm_project_has_its_version_file_and_real_version(docker_client, tmp_path):
    repo = _repo(tmp_path / "scmdemo")
    _commit(repo, {
        "pyproject.toml": SCM_PYPROJECT.format(name="scmdemo", module="scmdemo"),
        ".gitignore": "src/scmdemo/_version.py\n",
        "src/scmdemo/__init__.py": """\
            from ._version import version as __version__


            def require(minimum):
                \"\"\"Raise unless this scmdemo is at least ``minimum`` (X.Y).\"\"\"
                have = tuple(int(part) for part in __version__.split(".")[:2])
                if have < tuple(int(part) for part in minimum.split(".")):
                    raise RuntimeError(f"scmdemo {__version__} is older than {minimum}")
            """,
    }, "first release", tag="v3.4.0")
    base = _commit(repo, {"tests/test_version.py": """\
        import importlib.metadata

        import scmdemo


        def test_version_is_the_release_line():
            assert scmdemo.__version__.startswith("3.4.")
            assert importlib.metadata.version("scmdemo") == scmdemo.__version__


        def test_minversion():
            scmdemo.require("3.4")
        """}, "tests")
    folder = _tasks_folder(tmp_path, repo, "acme/scmdemo", [base], "tests/test_version.py")
    summary = build_tasks_dir(folder, runtime=DockerBackend(docker_client))
    assert summary.failed == 0, summary.failures
    task = read_tasks(folder / "tasks.jsonl")[0]
    assert task.scm_version.startswith("3.4.1.dev1+g")
    with DockerBackend(docker_client).start(task) as sandbox:
        run = lambda command: sandbox.exec(command, workdir="/testbed")  # noqa: E731
        assert "version = " in run("cat src/scmdemo/_version.py").output, "the generated version file exists"
        assert run("python -c 'import scmdemo; print(scmdemo.__version__)'").output.strip() == task.scm_version
        assert run("echo $SETUPTOOLS_SCM_PRETEND_VERSION").output.strip() == task.scm_version
        assert run("stat -c %U src/scmdemo/_version.py").output.strip() == "agent"
        assert run("git status --porcelain").output.strip() == "", "generated files stay out of the agent's diff"
        tests = run("python -m pytest -q -p no:cacheprovider")
        assert tests.exit_code == 0, tests.output
    assert _layer_mb(docker_client, task) < 5


INICONFIG = """\
    \"\"\"A tiny ini reader: the one pytest imports as ``iniconfig``.\"\"\"
    import configparser

    from ._version import version as __version__


    class ParseError(Exception):
        def __init__(self, path, lineno, msg):
            super().__init__(path, lineno, msg)
            self.path, self.lineno, self.msg = path, lineno, msg


    class SectionWrapper:
        def __init__(self, config, name):
            self.config, self.name = config, name

        def items(self):
            return list(self.config.sections[self.name].items())

        def get(self, key, default=None):
            return self.config.sections[self.name].get(key, default)


    class IniConfig:
        def __init__(self, path, data=None):
            self.path = str(path)
            parser = configparser.ConfigParser(interpolation=None)
            try:
                if data is None:
                    parser.read(self.path)
                else:
                    parser.read_string(data)
            except configparser.Error as exc:
                raise ParseError(self.path, getattr(exc, "lineno", 0), str(exc)) from None
            self.sections = {name: dict(parser.items(name)) for name in parser.sections()}

        def __contains__(self, name):
            return name in self.sections

        def __getitem__(self, name):
            return SectionWrapper(self, name)

        def get(self, section, name, default=None):
            return self.sections.get(section, {}).get(name, default)
"""


def test_a_dependency_of_pytest_stays_the_editable_checkout(docker_client, tmp_path):
    """iniconfig is what pytest imports: installing pytest (which wants iniconfig>=2) must not put
    the released package over the checkout, tagless (0.1.devN) or tagged (2.0.1.devN)."""
    repo = _repo(tmp_path / "iniconfig")
    test_file = "testing/test_iniconfig.py"
    tagless = _commit(repo, {
        "pyproject.toml": SCM_PYPROJECT.format(name="iniconfig", module="iniconfig"),
        ".gitignore": "src/iniconfig/_version.py\n",
        "src/iniconfig/__init__.py": INICONFIG,
        test_file: """\
            import iniconfig


            def test_reads_a_section():
                config = iniconfig.IniConfig("x.ini", data="[pytest]\\naddopts = -q\\n")
                assert "pytest" in config and config.get("pytest", "addopts") == "-q"
            """,
    }, "first")
    _commit(repo, {"README.md": "iniconfig\n"}, "release", tag="v2.0.0")
    tagged = _commit(repo, {"CHANGELOG.md": "next\n"}, "after the release")
    folder = _tasks_folder(tmp_path, repo, "acme/iniconfig", [tagless, tagged], test_file)
    summary = build_tasks_dir(folder, runtime=DockerBackend(docker_client), options=BuildOptions(jobs=2))
    assert summary.failed == 0, summary.failures
    tasks = {task.pull_number: task for task in read_tasks(folder / "tasks.jsonl")}
    assert tasks[1].scm_version == "" and tasks[2].scm_version.startswith("2.0.1.dev1+g")
    assert all("iniconfig" not in command.split()[-1] for task in tasks.values() for command in task.env_spec.install
               if "-e" not in command.split()), "the project's own distribution is never installed from the index"
    probe = ("import importlib.metadata as m, iniconfig, json; d = m.distribution('iniconfig'); "
             "print(json.dumps([iniconfig.__file__, d.version, json.loads(d.read_text('direct_url.json'))]))")
    for task in tasks.values():
        with DockerBackend(docker_client).start(task) as sandbox:
            where, version, direct_url = json.loads(sandbox.exec(["python", "-c", probe]).output)
            assert where == "/testbed/src/iniconfig/__init__.py"
            assert direct_url == {"url": "file:///testbed", "dir_info": {"editable": True}}
            assert version == task.scm_version or (not task.scm_version and version.startswith("0.1.dev"))
            tests = sandbox.exec("python -m pytest -q -p no:cacheprovider", workdir="/testbed")
            assert tests.exit_code == 0, tests.output


def test_install_that_shadows_the_project_fails_with_the_reason_and_leaves_no_image(docker_client, tmp_path):
    """acme-six ships six.py and depends on PyPI's six, which wins the import: not the project's code."""
    repo = _repo(tmp_path / "acme-six")
    base = _commit(repo, {
        "pyproject.toml": """\
            [build-system]
            requires = ["setuptools>=64"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "acme-six"
            version = "1.0"
            requires-python = ">=3.11"
            dependencies = ["six"]

            [tool.setuptools]
            py-modules = ["six"]
            """,
        "six.py": "PY3 = True\nACME = True\n",
        "tests/test_six.py": "import six\n\n\ndef test_acme():\n    assert six.ACME\n",
    }, "first")
    folder = _tasks_folder(tmp_path, repo, "acme/six", [base], "tests/test_six.py")
    options = BuildOptions(overrides={"acme/six": EnvOverride(date_pin=False)})
    summary = build_tasks_dir(folder, runtime=DockerBackend(docker_client), options=options)
    assert summary.failed == 1
    spec = read_tasks(folder / "tasks.jsonl")[0].env_spec
    assert spec.status == "env_failed"
    assert "six imports from /opt/venv/" in spec.error and "site-packages/six.py, not /testbed" in spec.error
    left = [image.tags for image in docker_client.images.list(filters={"label": "repo2env.repo=acme/six"})
            if (image.labels or {}).get("repo2env.namespace") == image_namespace()]
    assert left == [], "a failed rung's env and task images are removed"


def test_a_failed_rung_keeps_the_env_image_another_task_uses(docker_client, tmp_path):
    """Two tasks share one env image; the one whose tests do not collect loses its task image, the
    shared env image stays for the other."""
    repo = _repo(tmp_path / "pair")
    files = {
        "pyproject.toml": """\
            [build-system]
            requires = ["setuptools>=64"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "pair"
            version = "1.0"
            requires-python = ">=3.11"
            """,
        "pair/__init__.py": "ONE = 1\n",
        "tests/test_pair.py": "import pair\n\n\ndef test_one():\n    assert pair.ONE == 1\n",
    }
    good = _commit(repo, files, "good")
    broken = _commit(repo, {"tests/test_pair.py": "def test_one(:\n"}, "tests that do not parse")
    folder = _tasks_folder(tmp_path, repo, "acme/pair", [good, broken], "tests/test_pair.py")
    options = BuildOptions(jobs=2, overrides={"acme/pair": EnvOverride(date_pin=False)})
    summary = build_tasks_dir(folder, runtime=DockerBackend(docker_client), options=options)
    assert (summary.ok, summary.failed) == (1, 1)
    tasks = {task.pull_number: task for task in read_tasks(folder / "tasks.jsonl")}
    assert "test collection failed" in tasks[2].env_spec.error
    images = {tag for image in docker_client.images.list(filters={"label": "repo2env.repo=acme/pair"})
              if (image.labels or {}).get("repo2env.namespace") == image_namespace() for tag in image.tags}
    assert images == {tasks[1].env_spec.image, tasks[1].env_spec.env_image}
