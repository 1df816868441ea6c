"""Harbor task folders: in the published tree (manifest included), from `repo2env export harbor`,
and run as Harbor runs them: the task's environment/Dockerfile built, solution/ uploaded to /solution
and solve.sh run, tests/ uploaded to /tests and test.sh run as root with /logs/verifier mounted."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from repo2env.jsonl import write_jsonl
from repo2env.publish.dataset import PublishOptions, publish_to_folder, verify_manifest
from repo2env.publish.harbor import harbor_writer, write_task_folders

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_publish import validated_task  # noqa: E402 - the publish tests' task rows

PACKAGE = Path(__file__).resolve().parents[1] / "repo2env"


@pytest.fixture
def tasks_folder(tmp_path):
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [validated_task(2, "2023-03-01T10:00:00Z"), validated_task(4, "2024-06-01T10:00:00Z"),
                                         validated_task(6, "2024-07-01T10:00:00Z", verdict="rejected")])
    return folder


def test_published_tree_holds_a_harbor_folder_per_task_under_the_manifest(tasks_folder, tmp_path):
    summary = publish_to_folder([tasks_folder], tmp_path / "ds", PublishOptions(name="acme/envs"),
                                extra_writers=[harbor_writer("acme/envs")])
    assert summary.harbor_tasks == 2
    folder = tmp_path / "ds" / "tasks" / "acme__widgets-4"
    config = tomllib.loads((folder / "task.toml").read_text())
    assert config["task"]["name"] == "acme/acme__widgets-4"
    assert config["environment"]["docker_image"] == "repo2env/task:acme__widgets-4"
    assert config["verifier"]["timeout_sec"] > 900 and config["environment"]["workdir"] == "/testbed"
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
    assert settings["protected_pattern"] and len(task["canaries"]) == 3
    assert set(task["run_ids"]) == {"tests/t.py::test_empty[a::b]", "tests/t.py::test_full",
                                    *(canary["test_id"] for canary in task["canaries"])}
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert "tasks/acme__widgets-4/tests/test.sh" in manifest["files"] and verify_manifest(tmp_path / "ds") == []
    assert "`tasks/<instance_id>/` holds 2 Harbor task folders" in (tmp_path / "ds" / "README.md").read_text()
    (folder / "tests" / "grade.sh").write_text("exit 0\n")
    assert verify_manifest(tmp_path / "ds") == ["tasks/acme__widgets-4/tests/grade.sh: sha256 differs"]


def test_cli_export_harbor_and_publish_write_the_folders(tasks_folder, tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "repo2env", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    done = run("export", "harbor", str(tmp_path / "harbor"), "--from", str(tasks_folder))
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in (tmp_path / "harbor").iterdir()) == ["acme__widgets-2", "acme__widgets-4"]
    again = run("export", "harbor", str(tmp_path / "harbor"), "--from", str(tasks_folder))
    assert again.returncode == 1 and "exists and is not empty" in again.stderr and "Traceback" not in again.stderr
    everything = run("export", "harbor", str(tmp_path / "harbor"), "--from", str(tasks_folder), "--include-rejected",
                     "--overwrite")
    assert everything.returncode == 0 and len(list((tmp_path / "harbor").iterdir())) == 3
    published = run("publish", "--from", str(tasks_folder), "--to", str(tmp_path / "ds"), "--json")
    assert published.returncode == 0, published.stderr
    assert json.loads(published.stdout)["harbor_tasks"] == 2 and (tmp_path / "ds" / "tasks" / "acme__widgets-2").is_dir()


def _tar(folder: Path, name: str) -> bytes:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        tar.add(folder, arcname=name)
    return archive.getvalue()


def harbor_trial(client, image: str, task_dir: Path, logs: Path, *, solve: bool, agent_command: str | None = None):
    """One trial as Harbor runs it on Docker: the agent's phase (here the oracle's solve.sh, or a
    command), then tests/ uploaded to /tests and ``bash /tests/test.sh`` as root; returns what the
    verifier wrote to /logs/verifier."""
    logs.mkdir(parents=True)
    container = client.containers.run(image, ["sleep", "infinity"], detach=True, user="root", network_disabled=True,
                                      volumes={str(logs): {"bind": "/logs/verifier", "mode": "rw"}})
    try:
        if solve:
            container.put_archive("/", _tar(task_dir / "solution", "solution"))
            exit_code, output = container.exec_run(["bash", "/solution/solve.sh"], workdir="/testbed")
            assert exit_code == 0, output.decode()
        if agent_command:
            exit_code, output = container.exec_run(["bash", "-c", agent_command], workdir="/testbed")
            assert exit_code == 0, output.decode()
        container.put_archive("/", _tar(task_dir / "tests", "tests"))
        exit_code, output = container.exec_run(["bash", "/tests/test.sh"], workdir="/testbed", user="root")
        assert exit_code == 0, output.decode()
    finally:
        container.remove(force=True)
    return ((logs / "reward.txt").read_text().strip(), json.loads((logs / "reward.json").read_text()),
            json.loads((logs / "grading.json").read_text()))


@pytest.mark.docker
def test_harbor_verifier_scores_the_gold_solution_1_and_nothing_0(graded_demo, demo_repo, docker_client, tmp_path):
    from repo2env.runtime.images import image_namespace

    pull = next(p for p in demo_repo.pulls if p.partial_fixes)
    task = graded_demo[pull.number]
    write_task_folders([task], tmp_path / "tasks", dataset="repo2env/demo")
    task_dir = tmp_path / "tasks" / task.instance_id
    # Harbor builds environment/Dockerfile: FROM the task image, usable as it is.
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

        # The agent (root, as Harbor runs it) rewrites the hidden tests' module and adds a conftest that
        # passes everything: the verifier's path rules revert both, and the tests score the code as it is.
        test_file = task.FAIL_TO_PASS[0].split("::", 1)[0]
        forge = (f"echo 'def test_nothing(): pass' > {test_file} && mkdir -p tests && printf '%s\\n' "
                 "'import pytest' '@pytest.hookimpl(hookwrapper=True)' 'def pytest_runtest_call(item):' "
                 "'    item.runtest = lambda: None' '    yield' > tests/conftest.py")
        reward, parts, grading = harbor_trial(docker_client, tag, task_dir, tmp_path / "forged", solve=False,
                                              agent_command=forge)
        assert reward == "0.0" and parts["f2p_rate"] == 0.0 and grading["error"] is None, grading
    finally:
        docker_client.images.remove(tag, force=True)


@pytest.mark.docker
def test_the_verifier_imports_under_the_oldest_system_python(docker_client):
    """A task image's /usr/bin/python3 may be Debian 11's 3.9: the verifier and the package modules
    it copies import and score there (standard library only)."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.bootstrap import base_image_tag, find_base_image

    if find_base_image(DockerBackend(docker_client), "3.9") is None:
        pytest.skip("no Python 3.9 base image here: run 'repo2env runtime bootstrap --python 3.9'")
    program = ("import sys; sys.path.insert(0, '/pkg/repo2env/publish/harbor_task'); sys.path.insert(0, '/pkg');"
               "import verify; from repo2env.outcomes import TestStatus;"
               "print(sys.version_info[:2], verify.score({'a': TestStatus.PASSED}, ['a'], ['b']).reward)")
    output = docker_client.containers.run(base_image_tag("3.9"), ["/usr/bin/python3", "-I", "-S", "-c", program],
                                          volumes={str(PACKAGE): {"bind": "/pkg/repo2env", "mode": "ro"}},
                                          remove=True, network_disabled=True)
    assert output.decode().strip() == "(3, 9) 0.0"
