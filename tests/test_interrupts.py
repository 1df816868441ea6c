"""One SIGTERM stops `repo2env build` and `repo2env validate` while a task runs: queued tasks are
cancelled, the running task's containers removed, the output files left whole, the exit immediate."""

from __future__ import annotations

import secrets
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import image_namespace_of

from repo2env.jsonl import read_tasks
from repo2env.runtime.backends.docker import SANDBOX_LABEL
from repo2env.runtime.images import image_namespace
from repo2env.runtime.ownership import OWNER_PID_LABEL
from repo2env.validate.run import read_records

pytestmark = pytest.mark.docker


def _demo_sandboxes(docker_client, process: subprocess.Popen, namespace: str) -> dict[str, str]:
    """{container id: image} of every sandbox of a demo task in the image namespace ``namespace``
    that ``process`` started, running or not (other tests and checkouts use the engine too)."""
    # The engine's plain list: no per-container inspection that a concurrent removal would fail.
    return {container["Id"]: container["Image"] for container in docker_client.api.containers(
        all=True, filters={"label": [SANDBOX_LABEL, f"{OWNER_PID_LABEL}={process.pid}"]}) if container["Image"].startswith(
        f"{namespace}/task:repo2env-demo__textkit")}


def _interrupt_when(command: list[str], started, *, settle_s: float = 1.0, env: dict | None = None):
    """Run ``repo2env COMMAND``; once ``started(process)`` returns something, wait ``settle_s`` and send
    one SIGTERM. Returns (what started() returned, process, stderr, seconds from the signal to the exit)."""
    process = subprocess.Popen([sys.executable, "-m", "repo2env", *command], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    seen = None
    while not seen and time.monotonic() < deadline and process.poll() is None:
        seen = started(process)
        time.sleep(0.2)
    assert seen, f"nothing started before the command ended: {process.communicate()[1][-2000:]}"
    time.sleep(settle_s)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=90)
    return seen, process, stderr, time.monotonic() - signalled


def _assert_clean_exit(process, stderr: str, seconds: float) -> None:
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("interrupted"), stderr
    assert seconds < 30, "the command waited for the running task instead of stopping it"


def test_sigterm_stops_a_build_during_the_collection_check(built_demo, demo_repo, docker_client, tmp_path):
    from repo2env.mine.git import GitSource
    from repo2env.mine.miner import mine

    folder = tmp_path / "tasks"
    mine(GitSource(demo_repo.path, issues_path=demo_repo.issues_path), folder)
    total = len(read_tasks(folder / "tasks.jsonl"))
    # The demo's images exist (built_demo; in another namespace under xdist, then their layers are
    # cached): each task is its collection check in a sandbox, its images this namespace's.
    seen, process, stderr, seconds = _interrupt_when(
        ["build", "--from", str(folder), "-j", "1"],
        lambda process: set(_demo_sandboxes(docker_client, process, image_namespace())), settle_s=0.3)
    _assert_clean_exit(process, stderr, seconds)
    assert not seen & set(_demo_sandboxes(docker_client, process, image_namespace())), \
        "the running collection check's sandbox outlived the build"
    tasks = read_tasks(folder / "tasks.jsonl")  # whole: every line parses
    assert len(tasks) == total
    assert sum(bool(task.env_spec and task.env_spec.status == "env_ok") for task in tasks) < total, \
        "queued tasks were built after the signal"


def test_sigterm_during_an_image_build_leaves_no_build_container(built_demo, demo_repo, docker_client, tmp_path):
    """An image build cannot be stopped by removing a sandbox: the command exits without waiting for
    it, and the engine abandons the build when the command's connection closes."""
    from repo2env.mine.git import GitSource
    from repo2env.mine.miner import MineOptions, mine

    folder = tmp_path / "tasks"
    mine(GitSource(demo_repo.path, issues_path=demo_repo.issues_path), folder, MineOptions(limit=1))
    token = secrets.token_hex(6)
    (tmp_path / "overrides.yaml").write_text(
        f"repos:\n  {demo_repo.repo}:\n    extra_install: ['echo {token}; sleep 120']\n")

    def build_step(process=None):
        return {container["Id"] for container in docker_client.api.containers(all=True)
                if token in (container.get("Command") or "")}

    seen, process, stderr, seconds = _interrupt_when(
        ["build", "--from", str(folder), "--overrides", str(tmp_path / "overrides.yaml")], build_step)
    _assert_clean_exit(process, stderr, seconds)
    deadline = time.monotonic() + 20
    while build_step() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not build_step(), "the engine kept building after the command exited"
    [task] = read_tasks(folder / "tasks.jsonl")
    assert task.env_spec is None, "an interrupted task stays unbuilt, for the next run"


def test_sigterm_stops_validate_mid_task(built_demo, docker_client, tmp_path):
    source, tasks = built_demo
    folder = tmp_path / "tasks"
    folder.mkdir()
    for name in ("tasks.jsonl", "source.json", "funnel.json"):
        shutil.copy(source / name, folder / name)
    original = (folder / "tasks.jsonl").read_text()
    namespace = image_namespace_of(next(iter(tasks.values())).env_spec.image)  # the built demo's
    seen, process, stderr, seconds = _interrupt_when(
        ["validate", "--from", str(folder), "-j", "1"],
        lambda process: set(_demo_sandboxes(docker_client, process, namespace)), settle_s=1.5)
    _assert_clean_exit(process, stderr, seconds)
    time.sleep(1)  # a start under way at the signal has been waited for and removed; nothing new comes
    assert not set(_demo_sandboxes(docker_client, process, namespace)), "a sandbox of the interrupted validation remains"
    records = read_records(folder / "validation.jsonl")  # whole: every line parses
    assert len(records) < len(tasks), "queued tasks were validated after the signal"
    after = read_tasks(folder / "tasks.jsonl")
    assert len(after) == len(tasks)
    assert not records or (folder / "tasks.jsonl").read_text() != original

