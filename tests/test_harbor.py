"""Harbor task folders: in the published tree (manifest included), from `repo2env export harbor`, and
run by Harbor itself.

Two levels: a trial as Harbor runs it on Docker, rebuilt here with the docker SDK (the agent's
container, the collection step writing the agent's diff, a pristine container for the verifier
with the diff and tests/ uploaded, test.sh as root), which needs no Harbor; and the real `harbor`
CLI (PyPI, in its own Python >= 3.12 virtualenv, tests/client_venvs.py) linting the exported demo
and running its oracle, nop and a root agent (tests/harbor_agents.py) on one of its tasks, and the
same on a JavaScript (mocha) task of the fmtkit demo."""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from repo2env.jsonl import read_tasks, write_jsonl
from repo2env.publish.dataset import PublishOptions, publish_to_folder, verify_manifest
from repo2env.publish.harbor import AGENT_DIFF_ARTIFACT, write_task_folders

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_venvs import client_venv, unavailable  # noqa: E402 - tests/ helpers
from test_publish import validated_task  # noqa: E402 - the publish tests' task rows

PACKAGE = Path(__file__).resolve().parents[1] / "repo2env"
TESTS = Path(__file__).resolve().parent
HARBOR_REQUIREMENT = "harbor==0.26.0"


@pytest.fixture
def tasks_folder(tmp_path):
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [validated_task(2, "2023-03-01T10:00:00Z"), validated_task(4, "2024-06-01T10:00:00Z"),
                                         validated_task(6, "2024-07-01T10:00:00Z", verdict="rejected")])
    return folder


def test_published_tree_holds_a_harbor_folder_per_task_under_the_manifest(tasks_folder, tmp_path):
    summary = publish_to_folder([tasks_folder], tmp_path / "ds", PublishOptions(name="acme/envs"))
    assert summary.harbor_tasks == 2
    folder = tmp_path / "ds" / "tasks" / "acme__widgets-4"
    config = tomllib.loads((folder / "task.toml").read_text())
    assert config["schema_version"] == "1.4" and "version" not in config
    assert config["task"]["name"] == "acme/acme__widgets-4"
    assert config["environment"]["docker_image"] == "repo2env/task:acme__widgets-4"
    assert config["environment"]["network_mode"] == "no-network" and "allow_internet" not in config["environment"]
    assert config["verifier"]["timeout_sec"] > 900 and config["environment"]["workdir"] == "/testbed"
    # The verifier has its own container; the agent's diff is the artifact carried there.
    assert config["verifier"]["environment_mode"] == "separate" and config["verifier"]["user"] == "root"
    assert config["agent"]["user"] == "agent" and config["artifacts"] == [AGENT_DIFF_ARTIFACT]
    [collect] = config["verifier"]["collect"]
    assert collect["user"] == "agent" and collect["command"].endswith(AGENT_DIFF_ARTIFACT)
    assert "Widget 4 breaks when empty" in (folder / "instruction.md").read_text()
    assert (folder / "environment" / "Dockerfile").read_text().splitlines()[2] == "FROM repo2env/task:acme__widgets-4"
    assert (folder / "solution" / "gold.diff").read_text() == "diff --git a/w.py b/w.py\n"
    # The grading script is the package's own file, not a second copy.
    for name in ("grade.sh", "run_tests.sh", "restore.py"):
        assert (folder / "tests" / name).read_bytes() == (PACKAGE / "verify" / "scripts" / name).read_bytes()
    assert (folder / "tests" / "test.sh").stat().st_mode & 0o111 and (folder / "solution" / "solve.sh").stat().st_mode & 0o111
    settings = json.loads((folder / "tests" / "grade.json").read_text())
    task = json.loads((folder / "tests" / "task.json").read_text())
    # The verifier reads the task's one grading specification, as the grader does.
    from repo2env.jsonl import read_tasks
    from repo2env.verify.spec import GradingSpec, grading_spec

    row = next(row for row in read_tasks(tasks_folder / "tasks.jsonl") if row.instance_id == "acme__widgets-4")
    assert GradingSpec.model_validate_json((folder / "tests" / "spec.json").read_text()) == grading_spec(row)
    assert settings["protected_pattern"] and len(task["canaries"]) == 3 and task["agent_diff"] == AGENT_DIFF_ARTIFACT
    assert set(task["run_ids"]) == {"tests/t.py::test_empty[a::b]", "tests/t.py::test_full",
                                    *(canary["test_id"] for canary in task["canaries"])}
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert "tasks/acme__widgets-4/tests/test.sh" in manifest["files"] and verify_manifest(tmp_path / "ds") == []
    assert "`tasks/<instance_id>/` holds 2 Harbor task folders" in (tmp_path / "ds" / "README.md").read_text()
    (folder / "tests" / "grade.sh").write_text("exit 0\n")
    assert verify_manifest(tmp_path / "ds") == ["tasks/acme__widgets-4/tests/grade.sh: sha256 differs"]


def _tree(root: Path) -> dict[str, str]:
    """A Harbor export's files and their text, with what differs on every write (each folder's
    random canaries, plugin and scratch paths) left out: the files that must be the same."""
    varying = {"tests/grade.json", "tests/task.json", "tests/canaries.json"}
    return {path.relative_to(root).as_posix(): path.read_text() for path in sorted(root.rglob("*"))
            if path.is_file() and path.relative_to(root).as_posix().split("/", 1)[1] not in varying
            and "/tests/plugin/" not in path.as_posix()}


def test_cli_export_harbor_and_publish_write_the_same_folders(tasks_folder, tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "repo2env", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    done = run("export", "harbor", str(tmp_path / "harbor"), "--from", str(tasks_folder), "--name", "acme/envs")
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in (tmp_path / "harbor").iterdir()) == ["acme__widgets-2", "acme__widgets-4"]
    again = run("export", "harbor", str(tmp_path / "harbor"), "--from", str(tasks_folder))
    assert again.returncode == 1 and "exists and is not empty" in again.stderr and "Traceback" not in again.stderr
    published = run("publish", "--from", str(tasks_folder), "--to", str(tmp_path / "ds"), "--name", "acme/envs", "--json")
    assert published.returncode == 0, published.stderr
    assert json.loads(published.stdout)["harbor_tasks"] == 2
    assert _tree(tmp_path / "ds" / "tasks") == _tree(tmp_path / "harbor")
    everything = run("export", "harbor", str(tmp_path / "harbor"), "--from", str(tasks_folder), "--include-rejected",
                     "--network", "public", "--overwrite")
    assert everything.returncode == 0 and len(list((tmp_path / "harbor").iterdir())) == 3
    config = tomllib.loads((tmp_path / "harbor" / "acme__widgets-6" / "task.toml").read_text())
    assert config["environment"]["network_mode"] == "public"
    refused = run("export", "harbor", str(tmp_path / "other"), "--from", str(tasks_folder), "--network", "bridge")
    assert refused.returncode == 2 and "bridge" in refused.stderr and not (tmp_path / "other").exists()


def test_the_same_task_in_two_folders_is_exported_once_and_a_different_one_is_refused(tasks_folder, tmp_path):
    copy = tmp_path / "pipeline" / "acme__widgets"
    copy.mkdir(parents=True)
    shutil.copy(tasks_folder / "tasks.jsonl", copy / "tasks.jsonl")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "repo2env", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    # --from a folder without tasks.jsonl finds the task folders below it, as `validate ROOT` does.
    done = run("export", "harbor", str(tmp_path / "harbor"), "--from", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("2 Harbor tasks") and len(list((tmp_path / "harbor").iterdir())) == 2
    rows = tmp_path / "rows.jsonl"
    done = run("export", "swebench", str(rows), "--from", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(line)["instance_id"] for line in rows.read_text().splitlines()) == [
        "acme__widgets-2", "acme__widgets-4"]
    write_jsonl(copy / "tasks.jsonl", [validated_task(4, "2024-06-01T10:00:00Z").model_copy(
        update={"patch": "diff --git a/x.py b/x.py\n"})])
    refused = run("export", "swebench", str(tmp_path / "again.jsonl"), "--from", str(tmp_path))
    assert refused.returncode == 1 and "acme__widgets-4 is in" in refused.stderr and "--from" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "again.jsonl").exists()


def test_export_swebench_by_default_reads_every_folder_under_generated_and_writes_each_task_once(tasks_folder,
                                                                                                  tmp_path):
    """No --from: every task folder under generated/ of the current folder; the demo's own folder
    and a pipeline run's copy of it hold the same tasks, and each instance id is written once."""
    cwd = tmp_path / "work"
    for name in ("demo", "pipeline-out/acme__widgets"):
        (cwd / "generated" / name).mkdir(parents=True)
        shutil.copy(tasks_folder / "tasks.jsonl", cwd / "generated" / name / "tasks.jsonl")
    write_jsonl(cwd / "generated" / "other" / "tasks.jsonl", [validated_task(8, "2024-08-01T10:00:00Z")])
    (cwd / "elsewhere").mkdir()
    write_jsonl(cwd / "elsewhere" / "tasks.jsonl", [validated_task(10, "2024-09-01T10:00:00Z")])

    done = subprocess.run([sys.executable, "-m", "repo2env", "export", "swebench", "rows.jsonl"], capture_output=True,
                          text=True, cwd=cwd, timeout=120)
    assert done.returncode == 0, done.stderr
    exported = [json.loads(line)["instance_id"] for line in (cwd / "rows.jsonl").read_text().splitlines()]
    assert sorted(exported) == ["acme__widgets-2", "acme__widgets-4", "acme__widgets-8"], "once each; not elsewhere/"
    assert done.stderr.startswith("3 SWE-bench instances")


def _fmtkit_task_as_validated(demo, folder: Path):
    """A JavaScript (mocha) task of the fmtkit demo as build and validation leave it, without Docker:
    mined from the demo into ``folder``, its environment inferred by the JavaScript build recipe
    from the repository at its base commit (the image tag a build gives it), its FAIL_TO_PASS and
    PASS_TO_PASS the demo's declared ground truth, accepted."""
    from repo2env.languages import get_profile
    from repo2env.mine.git import GitSource
    from repo2env.mine.miner import mine
    from repo2env.models import RolloutResult, ValidationReport
    from repo2env.runtime.snapshot import GitRepoFiles

    mine(GitSource(demo.path, issues_path=demo.issues_path), folder)
    pull = next(pull for pull in demo.pulls if pull.fail_to_pass)
    task = next(task for task in read_tasks(folder / "tasks.jsonl") if task.pull_number == pull.number)
    files = GitRepoFiles(demo.path, task.base_commit)
    env_spec = get_profile(task.language).build_recipe().infer_env_spec(files, files.commit_date()).model_copy(
        update={"status": "env_ok", "image": f"repo2env/task:{task.instance_id}", "image_digest": "sha256:" + "1" * 64})
    validation = ValidationReport(verdict="accepted", reasons=[], policy="default", reward_mean=0.5,
                                  rollouts=[RolloutResult(kind="gold", reward=1.0), RolloutResult(kind="null", reward=0.0)])
    task = task.model_copy(update={"FAIL_TO_PASS": list(pull.fail_to_pass), "PASS_TO_PASS": list(pull.pass_to_pass),
                                   "env_spec": env_spec, "validation": validation})
    write_jsonl(folder / "tasks.jsonl", [task])
    return task


def test_a_javascript_task_gets_a_folder_and_one_without_a_verifier_is_counted_with_why(js_demo_repo, tmp_path):
    """A JavaScript (mocha) task gets a Harbor folder beside a Python one, its verifier reading the
    runner's reports with the runner's own reading (tests/task.json's reader, its modules under
    tests/lib/); a task with nothing to verify (rejected, no FAIL_TO_PASS) gets none: the publish and
    the export write the others and say which and why; an export with only such tasks is refused."""
    import pyarrow.parquet

    python_tasks = tmp_path / "generated" / "acme__widgets"
    write_jsonl(python_tasks / "tasks.jsonl", [validated_task(2, "2023-03-01T10:00:00Z")])
    rejected = tmp_path / "generated" / "rejected"
    write_jsonl(rejected / "tasks.jsonl", [validated_task(6, "2024-07-01T10:00:00Z", verdict="rejected").model_copy(
        update={"FAIL_TO_PASS": [], "PASS_TO_PASS": []})])
    js_task = _fmtkit_task_as_validated(js_demo_repo, tmp_path / "generated" / "fmtkit")
    assert js_task.env_spec.test_runner == "mocha"
    why = "no FAIL_TO_PASS tests"
    folders = [python_tasks, tmp_path / "generated" / "fmtkit", rejected]

    summary = publish_to_folder(folders, tmp_path / "ds", PublishOptions(name="acme/envs", include_rejected=True))
    assert summary.rows == 3 and summary.harbor_tasks == 2 and summary.harbor_left_out == {why: 1}
    # The parquet files themselves: datasets' cache may hand back an earlier table of the same path.
    rows = [name for path in (tmp_path / "ds" / "data").glob("*.parquet")
            for name in pyarrow.parquet.read_table(path).column("instance_id").to_pylist()]
    assert sorted(rows) == sorted(["acme__widgets-2", "acme__widgets-6", js_task.instance_id])
    assert sorted(path.name for path in (tmp_path / "ds" / "tasks").iterdir()) == sorted(
        ["acme__widgets-2", js_task.instance_id])
    card = (tmp_path / "ds" / "README.md").read_text()
    assert f"Harbor task folders: 2, 1 task without one ({why}: 1)." in card
    assert verify_manifest(tmp_path / "ds") == []
    js_folder = tmp_path / "ds" / "tasks" / js_task.instance_id
    reader = json.loads((js_folder / "tests" / "task.json").read_text())["reader"]
    settings = json.loads((js_folder / "tests" / "grade.json").read_text())
    assert reader["function"] == "repo2env.languages.javascript.runners:read_outcomes"
    assert [report["path"] for report in reader["plan"]["reports"]] == settings["reports"]
    assert settings["test_cmd"] == "/bin/sh -c " + shlex.quote(reader["plan"]["command"])
    assert (js_folder / "tests" / "lib" / "repo2env" / "languages" / "javascript" / "runners.py").is_file()
    assert tomllib.loads((js_folder / "task.toml").read_text())["task"]["keywords"] == ["repo2env", "swe", "javascript"]

    def run(*args):
        return subprocess.run([sys.executable, "-m", "repo2env", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    # The CLI's default --from: every task folder under generated/.
    published = run("publish", "--to", str(tmp_path / "ds2"), "--include-rejected", "--json")
    assert published.returncode == 0, published.stderr
    assert json.loads(published.stdout)["harbor_left_out"] == {why: 1}
    published = run("publish", "--to", str(tmp_path / "ds3"), "--include-rejected")
    assert "2 Harbor task folders, 1 task without one" in published.stderr, published.stderr
    done = run("export", "harbor", str(tmp_path / "harbor"), "--include-rejected")
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in (tmp_path / "harbor").iterdir()) == sorted(["acme__widgets-2", js_task.instance_id])
    assert done.stderr.startswith("2 Harbor tasks") and f"no Harbor folder acme__widgets-6: {why}" in done.stderr
    done = run("export", "harbor", str(tmp_path / "accepted"))
    assert done.returncode == 0 and "no Harbor folder" not in done.stderr, done.stderr
    assert sorted(path.name for path in (tmp_path / "accepted").iterdir()) == sorted(["acme__widgets-2", js_task.instance_id])

    refused = run("export", "harbor", str(tmp_path / "none"), "--from", str(rejected), "--include-rejected")
    assert refused.returncode == 1 and f"no Harbor folder to write: 1 task without one ({why}: 1)" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "none").exists()


def _tar(folder: Path, name: str) -> bytes:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        tar.add(folder, arcname=name)
    return archive.getvalue()


def _file_tar(name: str, payload: bytes) -> bytes:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return archive.getvalue()


def harbor_trial(client, image: str, task_dir: Path, logs: Path, *, solve: bool, agent_command: str | None = None):
    """One trial as Harbor runs a task with a separate verifier on Docker: the agent's phase in one
    container (the oracle's solve.sh as the task's agent user, or a command as root), the collection
    step of task.toml there, then a pristine container of the same image with the artifact and tests/
    uploaded and ``bash /tests/test.sh`` run as root; returns what the verifier wrote to /logs/verifier."""
    import docker.errors

    config = tomllib.loads((task_dir / "task.toml").read_text())
    [collect] = config["verifier"]["collect"]
    logs.mkdir(parents=True)
    agent = client.containers.run(image, ["sleep", "infinity"], detach=True, user="root", network_disabled=True)
    try:
        if solve:
            agent.put_archive("/", _tar(task_dir / "solution", "solution"))
            exit_code, output = agent.exec_run(["bash", "/solution/solve.sh"], workdir="/testbed",
                                               user=config["agent"]["user"])
            assert exit_code == 0, output.decode()
        if agent_command:
            exit_code, output = agent.exec_run(["bash", "-c", agent_command], workdir="/testbed", user="root")
            assert exit_code == 0, output.decode()
        # Harbor runs the collection best-effort and carries over whatever artifact exists.
        agent.exec_run(["bash", "-c", collect["command"]], user=collect["user"])
        try:
            chunks, _ = agent.get_archive(AGENT_DIFF_ARTIFACT)
            with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
                agent_diff = tar.extractfile(Path(AGENT_DIFF_ARTIFACT).name).read()
        except docker.errors.NotFound:
            agent_diff = None
    finally:
        agent.remove(force=True)
    verifier = client.containers.run(image, ["sleep", "infinity"], detach=True, user="root", network_disabled=True,
                                     volumes={str(logs): {"bind": "/logs/verifier", "mode": "rw"}})
    try:
        if agent_diff is not None:
            verifier.exec_run(["mkdir", "-p", str(Path(AGENT_DIFF_ARTIFACT).parent)], user="root")
            verifier.put_archive(str(Path(AGENT_DIFF_ARTIFACT).parent),
                                 _file_tar(Path(AGENT_DIFF_ARTIFACT).name, agent_diff))
        verifier.put_archive("/", _tar(task_dir / "tests", "tests"))
        exit_code, output = verifier.exec_run(["bash", "/tests/test.sh"], workdir="/testbed",
                                              user=config["verifier"]["user"])
        assert exit_code == 0, output.decode()
    finally:
        verifier.remove(force=True)
    return ((logs / "reward.txt").read_text().strip(), json.loads((logs / "reward.json").read_text()),
            json.loads((logs / "grading.json").read_text()))


def _gold_one_nothing_zero(docker_client, task, tmp_path: Path) -> tuple[Path, str]:
    """Export ``task``'s Harbor folder, build its environment image as Harbor does (its Dockerfile is
    FROM the task image, usable as it is), and check the verifier: gold 1.0 on every test, nothing
    0.0 with the tests run and failed. Returns the folder and the image tag (the caller removes it)."""
    from repo2env.runtime.images import image_namespace

    write_task_folders([task], tmp_path / "tasks", dataset="repo2env/demo")
    task_dir = tmp_path / "tasks" / task.instance_id
    tag = f"{image_namespace()}-harbor/env:{task.instance_id}"
    docker_client.images.build(path=str(task_dir / "environment"), tag=tag, rm=True)
    try:
        reward, parts, grading = harbor_trial(docker_client, tag, task_dir, tmp_path / "gold", solve=True)
        assert reward == "1.0", grading
        assert parts == {"reward": 1.0, "f2p_rate": 1.0, "p2p_rate": 1.0, "resolved": 1.0, "tampered": 0.0}
        assert set(grading["tests"]) == set(task.FAIL_TO_PASS) | set(task.PASS_TO_PASS)
        reward, parts, grading = harbor_trial(docker_client, tag, task_dir, tmp_path / "nothing", solve=False)
        assert reward == "0.0" and parts["f2p_rate"] == 0.0 and parts["p2p_rate"] == 1.0, grading
        assert grading["error"] is None and not grading["tampered"], "the tests ran and failed"
    except BaseException:
        docker_client.images.remove(tag, force=True)
        raise
    return task_dir, tag


@pytest.mark.docker
def test_harbor_verifier_scores_the_gold_solution_1_and_nothing_0(graded_demo, demo_repo, docker_client, tmp_path):

    pull = next(p for p in demo_repo.pulls if p.partial_fixes)
    task = graded_demo[pull.number]
    task_dir, tag = _gold_one_nothing_zero(docker_client, task, tmp_path)
    try:

        # The agent (root here) rewrites the hidden tests' module and adds a conftest that passes
        # everything: the verifier's path rules revert both, and the tests score the code as it is.
        test_file = task.FAIL_TO_PASS[0].split("::", 1)[0]
        forge = (f"echo 'def test_nothing(): pass' > {test_file} && mkdir -p tests && printf '%s\\n' "
                 "'import pytest' '@pytest.hookimpl(hookwrapper=True)' 'def pytest_runtest_call(item):' "
                 "'    item.runtest = lambda: None' '    yield' > tests/conftest.py")
        reward, parts, grading = harbor_trial(docker_client, tag, task_dir, tmp_path / "forged", solve=False,
                                              agent_command=forge)
        assert reward == "0.0" and parts["f2p_rate"] == 0.0 and grading["error"] is None, grading

        # No diff arrives (the collection failed, or the agent removed it): 0, said why, no tests run.
        reward, parts, grading = harbor_trial(docker_client, tag, task_dir, tmp_path / "lost", solve=True,
                                              agent_command="rm -rf /testbed/.git")
        assert reward == "0.0" and "not collected" in grading["error"] and grading["pytest_exit"] is None, grading
    finally:
        docker_client.images.remove(tag, force=True)


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_verifier_of_a_javascript_task_scores_gold_1_nothing_0_and_a_forged_report_0(built_js_demo, docker_client,
                                                                                            tmp_path):
    """The exported folder of a built fmtkit (mocha) task, its ground truth's FAIL_TO_PASS: the verifier
    in a pristine container of the task image reads mocha's reports as the grader does. The gold
    solution scores 1.0, nothing 0.0, and code that rewrites every report at exit to all passed
    (tests/test_hacks_js.py's) 0.0, tampered: the live outcomes mocha's reporter streamed to the
    verifier's collector say the task's tests failed."""
    import base64

    from test_hacks_js import FORGE_AT_EXIT

    from repo2env.demo import JS_DEMO_PULLS

    _, tasks = built_js_demo
    (pull,) = [pull for pull in JS_DEMO_PULLS if pull.number == 10]
    task = tasks[10].model_copy(update={"FAIL_TO_PASS": list(pull.fail_to_pass), "PASS_TO_PASS": list(pull.pass_to_pass)})
    assert task.env_spec.test_runner == "mocha"
    task_dir, tag = _gold_one_nothing_zero(docker_client, task, tmp_path)
    try:

        # The forger's code after the first line of the module the gold patch fixes, as an agent would put it.
        source = next(line.split(" b/", 1)[1] for line in task.patch.splitlines()
                      if line.startswith("diff --git ") and line.split(" b/", 1)[1].startswith("lib/"))
        code = base64.b64encode(FORGE_AT_EXIT.encode()).decode()
        forge = (f"{{ head -n 1 {source}; echo {code} | base64 -d; tail -n +2 {source}; }} > /tmp/forged.js && "
                 f"cat /tmp/forged.js > {source}")
        reward, parts, grading = harbor_trial(docker_client, tag, task_dir, tmp_path / "forged", solve=False,
                                              agent_command=forge)
        assert reward == "0.0" and parts["tampered"] == 1.0 and "the live outcomes say failed" in grading["error"], grading
    finally:
        docker_client.images.remove(tag, force=True)


@pytest.mark.docker
def test_the_verifier_imports_under_the_oldest_system_python(docker_client, tmp_path):
    """A task image's /usr/bin/python3 may be Debian 11's 3.9 (a Node 12 task's too): an exported
    folder's verifier imports and scores there with nothing but its tests/ (the package modules
    under lib/, standard library only), a JavaScript task's with its runner's reading."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.bootstrap import base_image_tag, find_base_image

    if find_base_image(DockerBackend(docker_client), "3.9") is None:
        pytest.skip("no Python 3.9 base image here: run 'repo2env runtime bootstrap --python 3.9'")
    task = validated_task(2, "2023-03-01T10:00:00Z")
    write_task_folders([task], tmp_path, dataset="acme/envs")
    program = ("import sys; sys.path.insert(0, '/tests'); import verify; from repo2env.outcomes import TestStatus;"
               "print(sys.version_info[:2], verify.score({'a': TestStatus.PASSED}, ['a'], ['b']).reward)")
    output = docker_client.containers.run(base_image_tag("3.9"), ["/usr/bin/python3", "-I", "-S", "-c", program],
                                          volumes={str(tmp_path / task.instance_id / "tests"): {"bind": "/tests", "mode": "ro"}},
                                          remove=True, network_disabled=True)
    assert output.decode().strip() == "(3, 9) 0.0"

    # A JavaScript task's: its runner's reading (a report never written: its file's tests are errors).
    from test_grade_js import _harbor_tests, _task

    _harbor_tests(_task(), tmp_path / "js")
    program = ("import sys; sys.path.insert(0, '/tests'); import verify; task = verify.load('task.json');"
               "print(sys.version_info[:2], verify.report_reader(task['reader'])({})[task['run_ids'][0]])")
    output = docker_client.containers.run(base_image_tag("3.9"), ["/usr/bin/python3", "-I", "-S", "-c", program],
                                          volumes={str(tmp_path / "js" / "tests"): {"bind": "/tests", "mode": "ro"}},
                                          remove=True, network_disabled=True)
    assert output.decode().strip() == "(3, 9) error"


# --- the real Harbor CLI ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def harbor():
    """The ``harbor`` command (PyPI, pinned), in its own virtualenv of a Python >= 3.12; its docker
    environment needs Docker Compose v2 (``make compose`` fetches it)."""
    binary = client_venv("harbor", [HARBOR_REQUIREMENT], minimum_python=(3, 12)) / "harbor"
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
        unavailable("Harbor's docker environment needs Docker Compose v2 ('docker compose'): run 'make compose'")
    return binary


def run_harbor(harbor: Path, *args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    # LiteLLM (imported by harbor) would try to fetch its model price list from GitHub at start-up.
    environment = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(TESTS)}
    return subprocess.run([str(harbor), *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=environment)


@pytest.fixture(scope="session")
def harbor_export(validated, session_registry, tmp_path_factory):
    """The validated demo exported as a user would for Harbor on this machine: images pushed to a
    registry (pinned by digest), network policy public (Harbor's no-network sidecar needs Docker Hub)."""
    folder, _ = validated
    out = tmp_path_factory.mktemp("harbor-export") / "tasks"
    done = subprocess.run([sys.executable, "-m", "repo2env", "export", "harbor", str(out), "--from", str(folder),
                           "--name", "repo2env/demo", "--network", "public", "--push-images", f"{session_registry}/demo"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_lint_finds_nothing_in_the_exported_demo(harbor, harbor_export):
    tasks = sorted(str(path) for path in harbor_export.iterdir())
    assert tasks
    linted = run_harbor(harbor, "lint", "--select", "ALL", "--json", *tasks, cwd=harbor_export)
    assert linted.returncode == 0 and json.loads(linted.stdout) == [], linted.stdout + linted.stderr
    config = tomllib.loads((harbor_export / Path(tasks[0]).name / "task.toml").read_text())
    assert "@sha256:" in config["environment"]["docker_image"]


def _job(harbor: Path, name: str, task_dir: Path, agents: list[dict], jobs: Path, *,
         overlays: list[Path] = ()) -> dict[str, dict]:
    """Run one Harbor job (every agent on ``task_dir``, with Compose ``overlays`` on the agent's
    container); each agent's rewards, by its name."""
    jobs.mkdir(parents=True, exist_ok=True)
    config = jobs / f"{name}.json"
    config.write_text(json.dumps({"job_name": name, "jobs_dir": str(jobs), "n_concurrent_trials": 3, "quiet": True,
                                  "agents": agents, "tasks": [{"path": str(task_dir)}],
                                  "environment": {"extra_docker_compose": [str(path) for path in overlays]}}))
    done = run_harbor(harbor, "run", "-c", str(config), "-y", cwd=jobs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rewards = {}
    for result in (jobs / name).glob("*/result.json"):
        trial = json.loads(result.read_text())
        assert trial["exception_info"] is None, trial["exception_info"]
        agent = trial["agent_info"]["name"]
        rewards[agent] = trial["verifier_result"]["rewards"]
    assert len(rewards) == len(agents), rewards
    return rewards


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_runs_the_oracle_to_1_nop_to_0_and_a_root_agent_planting_the_fix_outside_testbed_to_0(
        harbor, harbor_export, validated, tmp_path):
    from repo2env.jsonl import read_tasks

    folder, _ = validated
    task = next(task for task in read_tasks(folder / "tasks.jsonl")
                if task.validation and task.validation.verdict == "accepted")
    task_dir = harbor_export / task.instance_id
    fix = tmp_path / "fix.diff"
    fix.write_text(task.patch)
    planted = {"import_path": "harbor_agents:PlantedFixAgent", "kwargs": {"patch_path": str(fix)}}
    # docs/exports.md's way to keep the agent off the network without Harbor's egress sidecar (Docker Hub).
    offline = tmp_path / "no-network.yaml"
    offline.write_text("services:\n  main:\n    network_mode: none\n")
    rewards = _job(harbor, "separate", task_dir, [{"name": "oracle"}, {"name": "nop"}, planted], tmp_path / "jobs",
                   overlays=[offline])
    assert rewards["oracle"] == {"reward": 1.0, "f2p_rate": 1.0, "p2p_rate": 1.0, "resolved": 1.0, "tampered": 0.0}
    assert rewards["nop"]["reward"] == 0.0 and rewards["nop"]["f2p_rate"] == 0.0 and rewards["nop"]["p2p_rate"] == 1.0
    assert rewards["repo2env-planted-fix"]["reward"] == 0.0, "what a root agent changes outside /testbed stays behind"

    # The probe is real: the same task with the verifier in the agent's container scores the planted fix.
    shared = tmp_path / "shared" / task.instance_id
    shutil.copytree(task_dir, shared)
    toml = (shared / "task.toml").read_text()
    (shared / "task.toml").write_text(toml.replace('environment_mode = "separate"', 'environment_mode = "shared"'))
    rewards = _job(harbor, "shared", shared, [planted], tmp_path / "jobs")
    assert rewards["repo2env-planted-fix"]["reward"] == 1.0, rewards


@pytest.fixture(scope="session")
def harbor_js_export(accepted_js_task, session_registry, tmp_path_factory):
    """A fmtkit (mocha) task exported for Harbor as :func:`harbor_export` exports the Python demo
    (images pushed and pinned, network public): (the export's folder, the task)."""
    folder, task = accepted_js_task
    out = tmp_path_factory.mktemp("harbor-js-export") / "tasks"
    done = subprocess.run([sys.executable, "-m", "repo2env", "export", "harbor", str(out), "--from", str(folder),
                           "--name", "repo2env/demo", "--network", "public", "--push-images", f"{session_registry}/js-demo"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return out, task


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_lints_a_javascript_task_and_runs_its_oracle_to_1_nop_to_0_and_a_node_modules_shim_to_0(
        harbor, harbor_js_export, tmp_path):
    """Harbor's own checks and trials on a JavaScript (mocha) task's folder, as on the Python demo's:
    ``harbor lint --select ALL`` finds nothing; the oracle scores 1.0, nop 0.0, and a root agent that
    puts the fix into the entry script of mocha's _mocha under node_modules (out of git, so out of its diff) and
    leaves the tracked files alone 0.0, which the same agent scores 1.0 with the verifier in its container."""
    export, task = harbor_js_export
    task_dir = export / task.instance_id
    linted = run_harbor(harbor, "lint", "--select", "ALL", "--json", str(task_dir), cwd=export)
    assert linted.returncode == 0 and json.loads(linted.stdout) == [], linted.stdout + linted.stderr

    fix = tmp_path / "fix.diff"
    fix.write_text(task.patch)
    # The plan starts node_modules/.bin/_mocha under node (as bin/mocha would): the shim goes there.
    shim = {"import_path": "harbor_agents:NodeModulesShimAgent", "kwargs": {"patch_path": str(fix), "runner": "_mocha"}}
    offline = tmp_path / "no-network.yaml"
    offline.write_text("services:\n  main:\n    network_mode: none\n")
    rewards = _job(harbor, "js-separate", task_dir, [{"name": "oracle"}, {"name": "nop"}, shim], tmp_path / "jobs",
                   overlays=[offline])
    assert rewards["oracle"] == {"reward": 1.0, "f2p_rate": 1.0, "p2p_rate": 1.0, "resolved": 1.0, "tampered": 0.0}
    assert rewards["nop"]["reward"] == 0.0 and rewards["nop"]["f2p_rate"] == 0.0 and rewards["nop"]["p2p_rate"] == 1.0
    assert rewards["repo2env-node-modules-shim"]["reward"] == 0.0, "node_modules stays in the agent's container"

    # The probe is real: with the verifier in the agent's container, mocha starts with the shim and the fix.
    shared = tmp_path / "shared" / task.instance_id
    shutil.copytree(task_dir, shared)
    toml = (shared / "task.toml").read_text()
    (shared / "task.toml").write_text(toml.replace('environment_mode = "separate"', 'environment_mode = "shared"'))
    rewards = _job(harbor, "js-shared", shared, [shim], tmp_path / "jobs", overlays=[offline])
    assert rewards["repo2env-node-modules-shim"]["reward"] == 1.0, rewards
