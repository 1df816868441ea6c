"""`repo2env serve` and `repo2env export openenv` on the validated demo, driven by OpenEnv's own
clients against a real server process: a gold episode over the WebSocket earns 1.0, an empty one 0.0,
mistakes come back as error observations or HTTP errors, OpenEnv's runtime validator passes, the
exported package's entry module serves the same tasks, and no sandbox outlives the server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repo2env.envs.catalog import TaskCatalog
from repo2env.errors import InputError


def _require_openenv():
    """OpenEnv's package, or a skip outside CI (`make install` adds the 'openenv' extra)."""
    try:
        import openenv.core  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"openenv-core is required in CI: {exc}")
        pytest.skip("openenv-core is not installed: pip install -e '.[openenv]'")


def test_catalog_hands_out_tasks_by_id_seed_and_turn():
    rows = [{"instance_id": f"acme__w-{number}", "patch": ""} for number in (1, 2, 3)]
    catalog = TaskCatalog(rows)
    assert [catalog.pick()["instance_id"] for _ in range(4)] == ["acme__w-1", "acme__w-2", "acme__w-3", "acme__w-1"]
    assert catalog.pick(seed=4)["instance_id"] == "acme__w-2"
    assert catalog.row("acme__w-3")["instance_id"] == "acme__w-3"
    with pytest.raises(InputError, match="unknown task id 'nope'"):
        catalog.row("nope")
    with pytest.raises(InputError, match="no rows"):
        TaskCatalog([])


def test_missing_extra_is_one_line(tmp_path):
    """Without openenv-core, `serve` says how to install it (run with the module hidden)."""
    hide = ("import sys, runpy; sys.modules['openenv'] = None; sys.argv = ['repo2env', 'serve', '--dataset', "
            f"{str(tmp_path)!r}]; from repo2env.cli import main; main()")
    (tmp_path / "data").mkdir()
    result = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.splitlines()[0].startswith("error: OpenEnv support is not installed")
    assert "pip install 'repo2env[openenv]'" in result.stderr and "Traceback" not in result.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(command: list[str], cwd: Path, logs: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {**os.environ, "REPO2ENV_ENV_LOGS_DIR": str(logs), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([part.replace("{port}", str(port)) for part in command], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    import requests

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited: {process.stdout.read()}")
        try:
            if requests.get(f"{url}/health", timeout=2).ok:
                return process, url
        except requests.ConnectionError:
            time.sleep(0.3)
    process.kill()
    raise AssertionError("the server did not answer /health within 120 s")


def _stop(process: subprocess.Popen, signal_number: int = signal.SIGINT) -> str:
    process.send_signal(signal_number)
    try:
        output, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return output


def _containers_of(docker_client, images: set[str]) -> set[str]:
    return {row["Id"] for row in docker_client.api.containers(all=True) if row["Image"] in images}


@pytest.fixture(scope="module")
def published(validated, tmp_path_factory):
    """The validated demo published to a folder: (folder, {instance_id: row})."""
    _require_openenv()
    from repo2env.publish.dataset import PublishOptions, publish_to_folder

    folder, _ = validated
    target = tmp_path_factory.mktemp("published") / "demo-envs"
    publish_to_folder([folder], target, PublishOptions(name="demo-envs"))
    catalog = TaskCatalog.from_published(target)
    return target, {task_id: catalog.row(task_id) for task_id in catalog.task_ids}


@pytest.mark.docker
def test_serve_runs_graded_episodes_over_openenv(published, docker_client, tmp_path):
    import requests
    from openenv.cli._validation import validate_running_environment
    from openenv.core import GenericEnvClient

    from repo2env.envs.openenv_server import RepoAction, RepoEnvClient

    dataset, rows = published
    task_id, row = next(iter(rows.items()))
    images = {row["image"] for row in rows.values()}
    before = _containers_of(docker_client, images)
    binary = str(Path(sys.executable).with_name("repo2env"))
    server, url = _start([binary, "serve", "--dataset", str(dataset), "--port", "{port}"], tmp_path, tmp_path / "logs")
    left_open = None
    try:
        with RepoEnvClient(base_url=url, message_timeout_s=600).sync() as env:
            first = env.reset(task_id=task_id)
            assert not first.done and not first.observation.error
            assert row["problem_statement"].strip()[:40] in first.observation.output
            state = env.state()
            assert state.task_id == task_id and state.step_count == 0 and state.episode_id
            written = env.step(RepoAction(tool="write_file", arguments={"path": "fix.diff", "content": row["patch"]}))
            assert not written.observation.error
            applied = env.step(RepoAction(tool="bash", arguments={"command": "git apply fix.diff && rm fix.diff"}))
            assert "[exit 0]" in applied.observation.output
            assert env.state().step_count == 2
            graded = env.step(RepoAction(tool="submit"))
            assert graded.done and graded.reward == 1.0, graded.observation.output
            assert env.state().submitted and env.state().reward == 1.0
            after = env.step(RepoAction(tool="bash", arguments={"command": "true"}))
            assert after.observation.error and "ended" in after.observation.output

            second = env.reset(task_id=task_id)
            assert env.state().episode_id != state.episode_id
            assert env.step(RepoAction(tool="bash", arguments={"command": "git status --short"})).observation.output \
                .strip() == "[exit 0]", "the next episode starts from a fresh sandbox"
            empty = env.step(RepoAction(tool="submit"))
            assert second.observation.task_id == task_id and empty.done and empty.reward == 0.0

            unknown_task = env.reset(task_id="acme__nothing-1")
            assert unknown_task.observation.error and unknown_task.done
            assert "unknown task id" in unknown_task.observation.output
            env.reset(task_id=task_id)
            unknown_tool = env.step(RepoAction(tool="rm_everything"))
            assert unknown_tool.observation.error and "unknown tool" in unknown_tool.observation.output
            bad_arguments = env.step(RepoAction(tool="bash", arguments={"cmd": "ls"}))
            assert bad_arguments.observation.error and "command" in bad_arguments.observation.output
            assert not env.step(RepoAction(tool="read_file", arguments={"path": "README.md"})).observation.error

        # OpenEnv's generic client (plain dicts), and an episode left open when the server stops.
        left_open = GenericEnvClient(base_url=url, message_timeout_s=600).sync()
        left_open.connect()
        turned = left_open.reset()
        assert turned.observation["task_id"] in rows and not turned.done
        listing = left_open.step({"tool": "bash", "arguments": {"command": "git log --oneline | wc -l"}})
        assert listing.observation["output"].startswith("1\n"), "a one-commit repository"
        assert left_open.state()["step_count"] == 1
        assert _containers_of(docker_client, images) - before, "the open episode has its sandbox"

        # HTTP: each request is its own environment (OpenEnv's HTTP semantics); mistakes are errors, not crashes.
        reset = requests.post(f"{url}/reset", json={"task_id": task_id}, timeout=120)
        assert reset.status_code == 200 and row["problem_statement"].strip()[:40] in reset.json()["observation"]["output"]
        assert requests.post(f"{url}/reset", json={"task_id": "nope"}, timeout=60).json()["observation"]["error"]
        stepped = requests.post(f"{url}/step", json={"action": {"tool": "bash", "arguments": {"command": "ls"}}},
                                timeout=60)
        assert stepped.status_code == 200 and "no episode" in stepped.json()["observation"]["output"]
        assert requests.post(f"{url}/step", json={"action": {"verb": "ls"}}, timeout=60).status_code == 422
        assert requests.get(f"{url}/state", timeout=60).json()["step_count"] == 0
        schema = requests.get(f"{url}/schema", timeout=60).json()
        assert {"tool", "arguments"} <= set(schema["action"]["properties"])
        report = validate_running_environment(url, timeout_s=30)
        assert report["passed"], [criterion for criterion in report["criteria"] if not criterion["passed"]]
    finally:
        output = _stop(server, signal.SIGTERM)  # what `docker stop` and CI timeouts send
        if left_open is not None:
            try:
                left_open.close()
            except Exception:  # the server went away first, as intended
                pass
    assert server.returncode in (0, 130, 143), output
    assert "Traceback" not in output, output
    assert _containers_of(docker_client, images) <= before, "no sandbox outlives the server"


@pytest.mark.docker
def test_export_openenv_package_serves_the_dataset(published, tmp_path):
    from openenv.core import GenericEnvClient

    dataset, rows = published
    package = tmp_path / "package"
    wheel = tmp_path / "repo2env-0.0.0-py3-none-any.whl"
    wheel.write_bytes(b"not a real wheel: the export only copies it")
    result = subprocess.run([str(Path(sys.executable).with_name("repo2env")), "export", "openenv", str(package),
                             "--dataset", str(dataset), "--name", "demo-envs", "--wheel", str(wheel)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    import yaml

    manifest = yaml.safe_load((package / "openenv.yaml").read_text())
    assert manifest == {"spec_version": 1, "name": "demo-envs", "type": "space", "runtime": "fastapi",
                        "app": "server.app:app", "port": 8000}
    dockerfile = (package / "Dockerfile").read_text()
    assert "repo2env[openenv]" in dockerfile and "--find-links /app/wheels" in dockerfile
    assert "COPY dataset/ /app/dataset/" in dockerfile and "server.app:app" in dockerfile
    assert "docker.sock" in (package / "README.md").read_text()
    assert (package / "wheels" / wheel.name).is_file()
    assert (package / "dataset" / "manifest.json").read_bytes() == (dataset / "manifest.json").read_bytes()
    again = subprocess.run([str(Path(sys.executable).with_name("repo2env")), "export", "openenv", str(package),
                            "--dataset", str(dataset)], capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and "exists and is not empty" in again.stderr

    # The package's entry module, run the way its Dockerfile runs it, serves the copied dataset.
    server, url = _start([sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", "{port}"],
                         package, tmp_path / "logs")
    try:
        with GenericEnvClient(base_url=url, message_timeout_s=600).sync() as env:
            task_id = next(iter(rows))
            first = env.reset(task_id=task_id)
            assert first.observation["task_id"] == task_id and not first.observation["error"]
            assert env.step({"tool": "submit"}).reward == 0.0
    finally:
        _stop(server)
