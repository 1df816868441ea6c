"""Building environments for real: env images shared, task snapshots without history, the ladder."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from repo2env.errors import InputError
from repo2env.jsonl import read_tasks, write_jsonl
from repo2env.models import Task
from repo2env.pipeline.stages import build_tasks_dir
from repo2env.runtime.backends.docker import DockerBackend
from repo2env.runtime.build import BuildOptions
from repo2env.runtime.snapshot import GitRepoFiles

pytestmark = pytest.mark.docker


def test_every_demo_task_builds_and_they_share_one_env_image(built_demo, docker_client):
    from repo2env.pipeline.stages import available_bases

    _, tasks = built_demo
    specs = [task.env_spec for task in tasks.values()]
    assert all(spec.status == "env_ok" and spec.image and spec.image_digest for spec in specs)
    # January 2024, requires-python >= 3.9: the newest Python of its time that the build may use
    # here (3.12 where its base image exists or a local CPython can make one; else Debian's 3.11).
    bases = available_bases(DockerBackend(docker_client))
    assert {spec.python for spec in specs} == {"3.12" if "py3.12" in bases else "3.11"}
    assert len({spec.env_image for spec in specs}) == 1, "same dependencies, same month: one env image"
    assert all(spec.rung == "inferred" for spec in specs)


def test_snapshot_is_the_base_commit_with_no_history(built_demo, docker_client, demo_repo):
    _, tasks = built_demo
    runtime = DockerBackend(docker_client)
    for task in list(tasks.values())[:3]:
        with runtime.start(task) as sandbox:
            run = lambda command: sandbox.exec(command, workdir="/testbed")  # noqa: E731
            assert run("git rev-list --all | wc -l").output.strip() == "1"
            objects = run("git cat-file --batch-all-objects --batch-check | awk '$2 == \"commit\"' | wc -l")
            assert objects.output.strip() == "1", "no other commit object may exist, reachable or not"
            assert run("git remote; git tag; git stash list; git reflog").output.strip() == ""
            assert "ORIG_HEAD" not in run("ls .git").output and "logs" not in run("ls .git").output.split()
            listed = sorted(run("git ls-files").output.split())
            assert listed == sorted(GitRepoFiles(demo_repo.path, task.base_commit).listing())
            assert run("git status --porcelain").output.strip() == ""
            assert run("stat -c %U /testbed /testbed/pyproject.toml").output.split() == ["agent", "agent"]
            assert run("touch /opt/venv/lib/x 2>&1; echo $?").output.strip().endswith("1")
            assert run("python -m pytest -q -p no:cacheprovider").exit_code == 0, "tests pass at the base"


def test_diff_sees_every_change_even_after_the_agent_commits(built_demo, docker_client):
    _, tasks = built_demo
    task = next(iter(tasks.values()))
    with DockerBackend(docker_client).start(task) as sandbox:
        assert sandbox.diff() == ""
        sandbox.write_file("/testbed/NOTES.txt", "new file\n")
        sandbox.exec("git rm -q --cached README.md >/dev/null; rm README.md; echo '# more' >> CHANGELOG.md",
                     workdir="/testbed")
        sandbox.exec("git add -A && git -c user.email=a@b -c user.name=a commit -qm hide", workdir="/testbed")
        patch = sandbox.diff()
    assert "diff --git a/NOTES.txt b/NOTES.txt" in patch and "new file mode" in patch
    assert "diff --git a/README.md b/README.md" in patch and "deleted file mode" in patch
    assert "+# more" in patch


def test_diff_keeps_bytes_that_are_not_utf8(built_demo, docker_client):
    _, tasks = built_demo
    task = next(iter(tasks.values()))
    with DockerBackend(docker_client).start(task) as sandbox:
        sandbox.exec("printf 'cr\\350me br\\373l\\351e\\n' > menu.txt", workdir="/testbed")
        patch = sandbox.diff().encode("utf-8", errors="surrogateescape")
    assert b"+cr\xe8me br\xfbl\xe9e\n" in patch, "the agent's Latin-1 line reaches the grader byte for byte"


def test_task_images_hold_no_build_setting_and_git_trusts_testbed_for_root(built_demo, docker_client):
    """A harness runs a task image as it is, often as root: git works in /testbed for every user, and
    what the build needed to reach the index (the host's CA paths, index URLs) was a build argument,
    not the image's environment."""
    from repo2env.runtime.bootstrap import BASE_FORMAT, base_image_tag
    from repo2env.runtime.package_access import PackageAccess

    _, tasks = built_demo
    task = next(iter(tasks.values()))
    status = docker_client.containers.run(task.env_spec.image, ["git", "-C", "/testbed", "status", "--porcelain"],
                                          user="root", remove=True, network_disabled=True)
    assert status == b"", "root's git reads the snapshot, clean"
    base = docker_client.images.get(base_image_tag(task.env_spec.python))
    if base.labels.get("repo2env.base_format") != BASE_FORMAT:
        pytest.skip(f"{base_image_tag(task.env_spec.python)} predates base format {BASE_FORMAT} (it bakes the CA "
                    "variables in): 'repo2env runtime bootstrap --force' rebuilds it")
    settings = PackageAccess(ca_bundle=Path("/ca.crt"), index_url="https://index", extra_index_url="https://extra",
                             trusted_host="index").container_env()
    environment = dict(item.split("=", 1) for item in docker_client.images.get(task.env_spec.image).attrs["Config"]["Env"])
    assert not set(environment) & set(settings), environment


def test_rebuild_reuses_every_image(built_demo, docker_client):
    folder, tasks = built_demo
    started = time.monotonic()
    summary = build_tasks_dir(folder, runtime=DockerBackend(docker_client))
    assert summary.reused == summary.ok == len(tasks)
    assert time.monotonic() - started < 30


def test_unbuilt_task_is_a_clear_error(built_demo, docker_client):
    _, tasks = built_demo
    unbuilt = next(iter(tasks.values())).model_copy(update={"env_spec": None})
    with pytest.raises(InputError, match="not built"):
        DockerBackend(docker_client).start(unbuilt)


def test_run_command_prints_output_and_diff(built_demo):
    folder, tasks = built_demo
    task = next(iter(tasks.values()))
    result = subprocess.run(
        [sys.executable, "-m", "repo2env", "run", "--task", task.instance_id, "--from", str(folder), "--",
         "echo hello > greeting.txt; cat greeting.txt; exit 4"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 4
    assert result.stdout.startswith("hello\n")
    assert "+hello" in result.stdout and "greeting.txt" in result.stdout


def _git(repo: Path, *args: str, date: str = "2021-05-03T10:00:00Z") -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def _commit(repo: Path, files: dict[str, str], message: str, date: str = "2021-05-03T10:00:00Z") -> str:
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message, date=date)
    return _git(repo, "rev-parse", "HEAD").strip()


def test_old_python_good_and_broken_installs_in_one_batch(docker_client, tmp_path):
    """A 2021 project limited to Python < 3.10 builds on 3.9; a broken setup.py fails with its log;
    the batch goes on."""
    repo = tmp_path / "oldlib"
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    good = _commit(repo, {
        "setup.py": "from setuptools import setup\nsetup(name='oldlib', version='1.0', packages=['oldlib'],"
                    " python_requires='>=3.6,<3.10')\n",
        "oldlib/__init__.py": "def answer():\n    return 42\n",
        "tests/test_answer.py": "from oldlib import answer\n\ndef test_answer():\n    assert answer() == 42\n",
    }, "good")
    broken = _commit(repo, {"setup.py": "raise SystemExit('this setup.py is broken on purpose')\n"}, "broken")
    test_patch = "diff --git a/tests/test_answer.py b/tests/test_answer.py\n"

    def task(number: int, base: str) -> Task:
        return Task(instance_id=f"acme__oldlib-{number}", repo="acme/oldlib", pull_number=number, base_commit=base,
                    patch="", test_patch=test_patch, problem_statement="x", created_at="2021-05-03T10:00:00Z")

    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [task(1, good), task(2, broken)])
    (folder / "source.json").write_text(f'{{"repo": "acme/oldlib", "clone_path": "{repo}", "source": "test"}}')
    runtime = DockerBackend(docker_client)
    summary = build_tasks_dir(folder, runtime=runtime, options=BuildOptions(jobs=2))
    assert (summary.ok, summary.failed) == (1, 1)
    by_id = {task.instance_id: task for task in read_tasks(folder / "tasks.jsonl")}
    ok, failed = by_id["acme__oldlib-1"].env_spec, by_id["acme__oldlib-2"].env_spec
    assert ok.status == "env_ok" and ok.python == "3.9"
    with runtime.start(by_id["acme__oldlib-1"]) as sandbox:
        assert sandbox.exec("python --version").output.startswith("Python 3.9")
        assert sandbox.exec("python -m pytest -q -p no:cacheprovider").exit_code == 0
    assert failed.status == "env_failed"
    assert "image build failed" in failed.error
    assert "broken on purpose" in Path(failed.log_path).read_text()


@pytest.mark.alone  # its timing does not hold beside two other workers (seen in a parallel run)
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_interrupted_run_leaves_no_container(built_demo, docker_client, signal_name):
    import signal as signals

    from repo2env.runtime.ownership import OWNER_PID_LABEL

    folder, tasks = built_demo
    task = next(iter(tasks.values()))
    process = subprocess.Popen(
        [sys.executable, "-m", "repo2env", "run", "--task", task.instance_id, "--from", str(folder), "--", "sleep 60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    label = {"label": [f"repo2env.instance_id={task.instance_id}", f"{OWNER_PID_LABEL}={process.pid}"]}
    # Only the container this command starts counts: others with the same label may come and go
    # (another test, a concurrent run on the same engine), so it is told apart by its owner and by
    # not existing beforehand.
    before = {container.id for container in docker_client.containers.list(all=True, filters=label)}
    deadline = time.monotonic() + 30
    ours: list[str] = []
    while not ours and time.monotonic() < deadline:
        ours = [c.id for c in docker_client.containers.list(all=True, filters=label) if c.id not in before]
        time.sleep(0.2)
    assert ours, "the sandbox never started"
    time.sleep(1)  # let the command get under way inside it
    process.send_signal(getattr(signals, signal_name))
    _, stderr = process.communicate(timeout=30)
    assert process.returncode != 0
    assert "Traceback" not in stderr
    remaining = {container.id for container in docker_client.containers.list(all=True, filters=label)}
    assert not set(ours) & remaining, "the interrupted command's sandbox outlived it"


def test_images_gc_removes_only_unreferenced_task_images(built_demo, demo_backend, demo_repo, tmp_path):
    """On every backend: a task image built on the demo's env image, then collected as unreferenced."""
    from repo2env.runtime.build import still_built
    from repo2env.runtime.images import ImageStore, task_image_tag
    from repo2env.runtime.snapshot import make_snapshot

    _, tasks = built_demo
    store = ImageStore(demo_backend)
    assert all(still_built(task, store) for task in tasks.values()), "the recorded image ids hold on this backend"
    keep = {task.env_spec.image for task in tasks.values()}
    model = next(iter(tasks.values()))
    orphan = model.model_copy(update={"instance_id": "repo2env-demo__textkit-999", "pull_number": 999})
    sha = make_snapshot(demo_repo.path, orphan.base_commit, tmp_path / "snapshot")
    store.ensure_task(orphan, model.env_spec.env_image, tmp_path / "snapshot", sha, log_path=tmp_path / "log")
    orphan_tag = task_image_tag(orphan)

    would = store.gc(keep_tags=keep, dry_run=True)
    assert orphan_tag in would
    assert not set(would) & keep and model.env_spec.env_image not in would
    assert store.find(orphan_tag) is not None, "a dry run removes nothing"
    store.gc(keep_tags=keep)
    assert store.find(orphan_tag) is None
    assert all(store.find(tag) is not None for tag in keep | {model.env_spec.env_image})


def test_build_without_an_engine_is_a_one_line_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "repo2env", "build"], capture_output=True, text=True, cwd=tmp_path,
                            env={**__import__("os").environ, "DOCKER_HOST": "unix:///nonexistent.sock"}, timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: no Docker engine answers")


def test_image_namespace_names_env_and_task_images(monkeypatch):
    from repo2env.errors import InputError
    from repo2env.models import EnvSpec, Task
    from repo2env.runtime.images import env_image_tag, task_image_tag

    spec = EnvSpec(python="3.11", install=["pip install -e ."], test_cmd="pytest")
    task = Task(instance_id="Owner__Name-7", repo="Owner/Name", pull_number=7, base_commit="a" * 40, patch="",
                test_patch="", problem_statement="", created_at="2024-01-01T00:00:00Z")
    monkeypatch.delenv("REPO2ENV_IMAGE_NAMESPACE", raising=False)
    assert env_image_tag(spec).startswith("repo2env/env:py3.11-")
    assert task_image_tag(task) == "repo2env/task:owner__name-7"
    monkeypatch.setenv("REPO2ENV_IMAGE_NAMESPACE", "ci-42/repo2env")
    assert env_image_tag(spec).startswith("ci-42/repo2env/env:py3.11-")
    assert task_image_tag(task) == "ci-42/repo2env/task:owner__name-7"
    monkeypatch.setenv("REPO2ENV_IMAGE_NAMESPACE", "Not A Name!")
    with pytest.raises(InputError):
        task_image_tag(task)


def test_a_collection_hang_gets_a_warmup_and_a_changed_override_rebuilds(docker_client, tmp_path):
    """A suite that downloads data at collection, retrying until the network answers, hangs in the
    sandbox: the build retries the same rung once with a warm-up (network, as the agent), the data
    lands in the task image, the task says it needs the network and the work tree stays clean. An
    override then rebuilds the task; the same override again reuses it."""
    from repo2env.languages.python.spec.overrides import EnvOverride

    repo = tmp_path / "datalib"
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    base = _commit(repo, {
        "pyproject.toml": '[project]\nname = "datalib"\nversion = "1.0"\nrequires-python = ">=3.9"\n',
        "datalib/__init__.py": "",
        "tests/conftest.py": """
            import pathlib
            import time
            import urllib.request

            # Fetched on first use and retried until the network answers, as data-set loaders do.
            DATA = pathlib.Path.home() / ".cache" / "datalib" / "pip-index.html"
            while not DATA.exists():
                try:
                    page = urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=60).read()
                except OSError:
                    time.sleep(1)
                    continue
                DATA.parent.mkdir(parents=True, exist_ok=True)
                (pathlib.Path("tests") / "downloaded.flag").write_text("fetched\\n")
                DATA.write_bytes(page)
        """,
        "tests/test_data.py": "from conftest import DATA\n\ndef test_data():\n    assert b'pip' in DATA.read_bytes()\n",
    }, "data")
    task = Task(instance_id="acme__datalib-1", repo="acme/datalib", pull_number=1, base_commit=base, patch="",
                test_patch="diff --git a/tests/test_data.py b/tests/test_data.py\n", problem_statement="x",
                created_at="2021-05-03T10:00:00Z")
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [task])
    (folder / "source.json").write_text(f'{{"repo": "acme/datalib", "clone_path": "{repo}", "source": "test"}}')
    runtime = DockerBackend(docker_client)
    options = BuildOptions(collect_timeout_s=20)

    summary = build_tasks_dir(folder, runtime=runtime, options=options)
    built = read_tasks(folder / "tasks.jsonl")[0]
    assert summary.ok == 1, built.env_spec.error
    assert built.env_spec.rung == "inferred+warmup" and built.env_spec.needs_network is True
    with runtime.start(built) as sandbox:
        assert sandbox.exec("python -m pytest -q -p no:cacheprovider tests", workdir="/testbed").exit_code == 0
        assert sandbox.exec("git status --porcelain", workdir="/testbed").output.strip() == ""

    override = EnvOverride(warmup="python -m pytest --collect-only -q tests")
    with_override = BuildOptions(collect_timeout_s=20, overrides={"acme/datalib": override})
    rebuilt = build_tasks_dir(folder, runtime=runtime, options=with_override)
    assert (rebuilt.ok, rebuilt.reused) == (1, 0), "a new override rebuilds the task"
    spec = read_tasks(folder / "tasks.jsonl")[0].env_spec
    assert (spec.rung, spec.warmup, spec.needs_network) == ("inferred", override.warmup, True)
    assert build_tasks_dir(folder, runtime=runtime, options=with_override).reused == 1


@pytest.mark.slow
def test_a_2016_commit_builds_on_its_own_python_with_its_date_pin_and_validates(docker_client, tmp_path):
    """A project of May 2016 tested on 2.7 and 3.4-3.5: it gets 3.6 (made from a local CPython when
    no image exists), its dependencies as of June 2016 on the first rung (pytest 2.9 then, which has
    no --rootdir or -o), its own code editable through pip's legacy install, and validation derives
    its tests and grades them on that pytest; the empty patch stops after its FAIL_TO_PASS tests."""
    from conftest import quick_policy

    from repo2env.validate.run import validate_task

    repo = tmp_path / "oldlib"
    dated = {"GIT_AUTHOR_DATE": "2016-05-10T10:00:00Z", "GIT_COMMITTER_DATE": "2016-05-10T10:00:00Z"}

    def commit(files: dict[str, str], message: str) -> str:
        for name, content in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(textwrap.dedent(content))
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", **dated}
        for args in (["add", "-A"], ["commit", "-qm", message]):
            subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)
        return _git(repo, "rev-parse", "HEAD").strip()

    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    base = commit({
        "setup.py": """
            from setuptools import setup
            setup(name="oldlib", version="1.0", packages=["oldlib"],
                  classifiers=["Programming Language :: Python :: 2.7", "Programming Language :: Python :: 3.5"])
        """,
        "tox.ini": "[tox]\nenvlist = py27,py34,py35\n[testenv]\ndeps = pytest\ncommands = py.test\n",
        "oldlib/__init__.py": "def answer():\n    return 41\n\n\ndef name():\n    return 'oldlib'\n",
        "tests/test_oldlib.py": "from oldlib import name\n\n\ndef test_name():\n    assert name() == 'oldlib'\n",
    }, "base")
    fixed = commit({
        "oldlib/__init__.py": "def answer():\n    return 42\n\n\ndef name():\n    return 'oldlib'\n",
        "tests/test_answer.py": "from oldlib import answer\n\n\ndef test_answer():\n    assert answer() == 42\n",
        "tests/test_oldlib.py": ("from oldlib import answer, name\n\n\ndef test_name():\n    assert name() == 'oldlib'\n"
                                 "\n\ndef test_answer_is_above_41():\n    assert answer() > 41\n"),
    }, "fix")
    task = Task(instance_id="acme__oldlib-7", repo="acme/oldlib", pull_number=7, base_commit=base,
                patch=_git(repo, "diff", base, fixed, "--", "oldlib"), test_patch=_git(repo, "diff", base, fixed, "--", "tests"),
                problem_statement="answer() should be 42", created_at="2016-05-10T10:00:00Z")
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [task])
    (folder / "source.json").write_text(f'{{"repo": "acme/oldlib", "clone_path": "{repo}", "source": "test"}}')
    runtime = DockerBackend(docker_client)
    summary = build_tasks_dir(folder, runtime=runtime, options=BuildOptions())
    built = read_tasks(folder / "tasks.jsonl")[0]
    spec = built.env_spec
    assert summary.ok == 1, spec.error
    assert (spec.python, spec.rung, spec.date_pin) == ("3.6", "inferred", "2016-06-01"), spec.python_reason
    assert spec.pytest_version.startswith("2."), spec.pytest_version
    with runtime.start(built) as sandbox:
        assert sandbox.exec("python --version").output.startswith("Python 3.6")
        where = sandbox.exec("python -c 'import oldlib; print(oldlib.__file__)'", workdir="/tmp").output.strip()
        assert where == "/testbed/oldlib/__init__.py", "the project's own code, editable"

    validated, record = validate_task(built, runtime, quick_policy(), logs_dir=tmp_path / "validate")
    assert record.verdict == "accepted", (record.reasons, record.error)
    assert set(validated.FAIL_TO_PASS) == {"tests/test_answer.py::test_answer", "tests/test_oldlib.py::test_answer_is_above_41"}
    assert validated.PASS_TO_PASS == ["tests/test_oldlib.py::test_name"]
    null = next(rollout for rollout in validated.validation.rollouts if rollout.kind == "null")
    assert null.grade.stopped_early and set(null.grade.tests) == set(validated.FAIL_TO_PASS)
    in_full = [rollout for rollout in validated.validation.rollouts
               if rollout.kind == "near_miss" or rollout.name.startswith("all-but")]
    assert in_full, "near misses and hunk drops were graded"
    for rollout in in_full:  # expected to pass some F2P tests: no first phase that decides nothing
        assert not rollout.grade.stopped_early and set(rollout.grade.tests) >= {*validated.FAIL_TO_PASS,
                                                                                *validated.PASS_TO_PASS}, rollout.name
    assert record.one_run_s and set(record.phases) >= {"derive", "gold", "variants"}


@pytest.mark.slow
def test_old_setuptools_fetches_setup_requires_through_the_proxy_and_no_image_keeps_its_ca(docker_client, tmp_path):
    """A 2018 project whose setup.py has setup_requires: on 3.6 its editable install is pip's legacy
    one, and setuptools 40 fetches the requirement with easy_install, which trusts only the system
    bundle. Behind this machine's proxy that works only with the host's CA in that bundle during the
    install (env layer, and the task layer's reinstall); neither image keeps it."""
    from repo2env.runtime.bootstrap import base_image_tag

    repo = tmp_path / "oldlib"
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    # A fresh env image each run (the spec's hash covers setup.py): one left by another run would
    # be reused, and nothing would be installed. The requirement is computed, as a dependency's
    # setup_requires is out of sight (cryptography 1.4's cffi): a literal one is installed before.
    base = _commit(repo, {
        "setup.py": f"""
            from setuptools import setup
            setup(name="oldlib", version="1.0", packages=["oldlib"], setup_requires=["".join(["to", "ml"])],  # {uuid.uuid4().hex}
                  classifiers=["Programming Language :: Python :: 2.7", "Programming Language :: Python :: 3.6"])
        """,
        "oldlib/__init__.py": "def answer():\n    return 42\n",
        "tests/test_answer.py": "from oldlib import answer\n\n\ndef test_answer():\n    assert answer() == 42\n",
    }, "base", date="2018-05-10T10:00:00Z")
    task = Task(instance_id="acme__oldlib-8", repo="acme/oldlib", pull_number=8, base_commit=base, patch="",
                test_patch="diff --git a/tests/test_answer.py b/tests/test_answer.py\n", problem_statement="x",
                created_at="2018-05-10T10:00:00Z")
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [task])
    (folder / "source.json").write_text(f'{{"repo": "acme/oldlib", "clone_path": "{repo}", "source": "test"}}')
    summary = build_tasks_dir(folder, runtime=DockerBackend(docker_client), options=BuildOptions())
    spec = read_tasks(folder / "tasks.jsonl")[0].env_spec
    try:
        assert summary.ok == 1, spec.error
        assert (spec.python, spec.rung) == ("3.6", "inferred")
        # setuptools >= 42 fetches a setup_requires with pip, which reads PIP_CERT: not this case.
        version = docker_client.containers.run(spec.image, ["python", "-c", "import setuptools; print(setuptools.__version__)"],
                                               remove=True, network_disabled=True).decode().strip()
        assert int(version.split(".")[0]) < 42, f"setuptools {version} does not use easy_install"
        bundle = "stat -c '%s %Y %a' /etc/ssl/certs/ca-certificates.crt; sha256sum /etc/ssl/certs/ca-certificates.crt"
        seen = {image: docker_client.containers.run(image, ["sh", "-c", bundle], remove=True, network_disabled=True)
                for image in (base_image_tag("3.6"), spec.env_image, spec.image)}
        assert len(set(seen.values())) == 1, seen
    finally:
        for image in (spec.image, spec.env_image):
            if image:
                docker_client.images.remove(image, force=True)


def test_a_collection_that_waits_on_a_silent_host_stops_soon_and_names_it(docker_client, tmp_path):
    """Test collection that waits on a host that accepts and never answers (here, one the conftest
    starts itself, so that it exists in the network-less sandbox too) makes no progress: the
    collection check stops after the idle limit, not its timeout; the warm-up with network waits the
    same way and is stopped too; the ladder ends there, and the reason names the host."""
    from repo2env.languages.python.spec.overrides import EnvOverride

    repo = tmp_path / "silentlib"
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    base = _commit(repo, {
        "pyproject.toml": '[project]\nname = "silentlib"\nversion = "1.0"\nrequires-python = ">=3.9"\n',
        "silentlib/__init__.py": "",
        "tests/conftest.py": """
            import socket
            import threading

            # A server that takes the connection and never says a word, as a stuck data host does.
            server = socket.socket()
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            held = []
            threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
            socket.create_connection(("localhost", server.getsockname()[1])).recv(1)
        """,
        "tests/test_one.py": "def test_one():\n    assert True\n",
    }, "silent")
    task = Task(instance_id="acme__silentlib-1", repo="acme/silentlib", pull_number=1, base_commit=base, patch="",
                test_patch="diff --git a/tests/test_one.py b/tests/test_one.py\n", problem_statement="x",
                created_at="2021-05-03T10:00:00Z")
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [task])
    (folder / "source.json").write_text(f'{{"repo": "acme/silentlib", "clone_path": "{repo}", "source": "test"}}')
    override = EnvOverride(python="3.11", date_pin=False)  # one install rung
    began = time.monotonic()
    summary = build_tasks_dir(folder, runtime=DockerBackend(docker_client), options=BuildOptions(
        overrides={"acme/silentlib": override}, collect_timeout_s=600, stall_idle_s=8))
    spec = read_tasks(folder / "tasks.jsonl")[0].env_spec
    assert summary.failed == 1 and spec.status == "env_failed"
    assert spec.error.startswith("inferred+warmup: the warm-up stalled: stalled after 8 s"), spec.error
    assert "waiting on localhost:" in spec.error and "connected, nothing arriving" in spec.error
    logs = folder / "logs" / "build"
    assert "stalled after 8 s" in (logs / "acme__silentlib-1-inferred.collect.log").read_text(), "the check stalled first"
    assert time.monotonic() - began < 400, "neither the warm-up's 900 s nor the check's 600 s were waited out"


def test_tests_that_collect_but_cannot_run_fail_the_rung(docker_client, tmp_path):
    """Collection passes, but every test run stops with an INTERNALERROR (a run-time hook breaks, as
    a filterwarnings naming a module the rung left out does): the rung fails and says why."""
    from repo2env.languages.python.spec.overrides import EnvOverride

    repo = tmp_path / "hooklib"
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    base = _commit(repo, {
        "pyproject.toml": '[project]\nname = "hooklib"\nversion = "1.0"\nrequires-python = ">=3.9"\n',
        "hooklib/__init__.py": "",
        "conftest.py": "def pytest_runtest_protocol(item, nextitem):\n    raise RuntimeError('broken at run time')\n",
        "tests/test_one.py": "def test_one():\n    assert True\n",
    }, "hooks")
    task = Task(instance_id="acme__hooklib-1", repo="acme/hooklib", pull_number=1, base_commit=base, patch="",
                test_patch="diff --git a/tests/test_one.py b/tests/test_one.py\n", problem_statement="x",
                created_at="2021-05-03T10:00:00Z")
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [task])
    (folder / "source.json").write_text(f'{{"repo": "acme/hooklib", "clone_path": "{repo}", "source": "test"}}')
    # One rung only: the Python and the (absent) date pin are fixed.
    override = EnvOverride(python="3.11", date_pin=False)
    summary = build_tasks_dir(folder, runtime=DockerBackend(docker_client),
                              options=BuildOptions(overrides={"acme/hooklib": override}))
    spec = read_tasks(folder / "tasks.jsonl")[0].env_spec
    assert summary.failed == 1 and spec.status == "env_failed"
    assert "cannot run (INTERNALERROR)" in spec.error and "broken at run time" in spec.error
