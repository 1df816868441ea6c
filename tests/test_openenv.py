"""`repo2env serve` and `repo2env export openenv` on the validated demo, driven by OpenEnv's own clients
and tools against real server processes: MCPToolClient over the WebSocket (a gold episode earns 1.0,
an empty one 0.0, refusals and mistakes are tool errors), OpenEnv's generic client and plain HTTP,
MCP's JSON-RPC at /mcp, `openenv validate` on the running server and on the exported package, the
package installed from its own uv.lock and serving, its image built with no wheel given, and no
sandbox (and nothing in the folder the server started in) left behind."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repo2env.envs.catalog import TaskCatalog
from repo2env.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_venvs import unavailable  # noqa: E402 - tests/ helpers

BINARY = str(Path(sys.executable).with_name("repo2env"))
TOOL_NAMES = {"bash", "read_file", "write_file", "str_replace", "run_tests", "submit"}


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
    assert "pip install 'repo2env-rl[openenv]'" in result.stderr and "Traceback" not in result.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(command: list[str], cwd: Path, environment: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """A server process (``{port}`` in ``command``, and PORT/HOST in its environment, name a free
    port); returns once /health answers."""
    port = _free_port()
    inherited = {name: value for name, value in os.environ.items() if name != "REPO2ENV_ENV_LOGS_DIR"}
    env = {**inherited, "PYTHONUNBUFFERED": "1", "PORT": str(port), "HOST": "127.0.0.1", **environment}
    process = subprocess.Popen([part.replace("{port}", str(port)) for part in command], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    import requests

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited: {process.stdout.read()}")
        try:
            if requests.get(f"{url}/health", timeout=2).ok:
                return process, url
        except requests.ConnectionError:
            time.sleep(0.3)
    process.kill()
    raise AssertionError("the server did not answer /health within 300 s")


def _stop(process: subprocess.Popen, signal_number: int = signal.SIGINT) -> str:
    process.send_signal(signal_number)
    try:
        output, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return output


def _sandboxes_of(docker_client, process: subprocess.Popen) -> set[str]:
    """The sandbox containers a server process started (the engine is shared with other work)."""
    from repo2env.runtime.ownership import OWNER_PID_LABEL

    return {row["Id"] for row in docker_client.api.containers(
        all=True, filters={"label": [f"{OWNER_PID_LABEL}={process.pid}"]})}


@pytest.fixture(scope="module")
def published(published_demo):
    """The validated demo published to a folder: (folder, {instance_id: row})."""
    _require_openenv()
    return published_demo


@pytest.mark.docker
def test_serve_runs_graded_episodes_over_openenv_and_mcp(published, docker_client, tmp_path):
    import requests
    from openenv.cli._validation import validate_running_environment
    from openenv.core import GenericEnvClient
    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.mcp_client import MCPToolClient

    dataset, rows = published
    task_id, row = next(iter(rows.items()))
    started_in, cache = tmp_path / "cwd", tmp_path / "cache"
    started_in.mkdir()
    # No REPO2ENV_ENV_LOGS_DIR: the gradings' logs go where they go by default.
    server, url = _start([BINARY, "serve", "--dataset", str(dataset), "--port", "{port}"], started_in,
                         {"REPO2ENV_CACHE": str(cache)})
    left_open = None
    try:
        with MCPToolClient(base_url=url, message_timeout_s=600).sync() as env:
            tools = {tool.name: tool for tool in env.list_tools()}
            assert set(tools) == TOOL_NAMES
            assert tools["bash"].input_schema["required"] == ["command"] and tools["bash"].description
            assert not env.reset(task_id=task_id).done
            state = env.state()
            assert state.episode_id and state.step_count == 0
            assert "wrote" in env.call_tool("write_file", path="fix.diff", content=row["patch"])
            assert env.call_tool("bash", command="git apply fix.diff && rm fix.diff").endswith("[exit 0]")
            # A refused call is a tool error (MCP's is_error) with the reason as its answer; the episode goes on.
            refused = env.step(CallToolAction(tool_name="read_file", arguments={"path": "/etc/passwd"}))
            assert refused.observation.error is None and not refused.done
            assert refused.observation.result["is_error"] and "outside /testbed" in refused.observation.result["data"]
            # ... so call_tool hands the reason back as the answer (only a call that cannot be made raises).
            assert env.call_tool("read_file", path="/etc/passwd").startswith("error: ")
            fine = env.step(CallToolAction(tool_name="read_file", arguments={"path": "README.md"}))
            assert not fine.observation.result["is_error"]
            # A call that cannot be made is a failed call (OpenEnv's ToolError, which the client raises).
            with pytest.raises(RuntimeError, match="unknown tool 'rm_everything'.*tool_not_found"):
                env.call_tool("rm_everything")
            with pytest.raises(RuntimeError, match="invalid_args"):
                env.call_tool("bash", cmd="ls")
            graded = env.step(CallToolAction(tool_name="submit"))
            assert graded.done and graded.reward == 1.0, graded.observation
            assert graded.observation.result["data"]["reward"] == 1.0
            with pytest.raises(RuntimeError, match="the episode has ended"):
                env.call_tool("bash", command="true")

            env.reset(task_id=task_id)
            assert env.state().episode_id != state.episode_id
            assert env.call_tool("bash", command="git status --short").strip() == "[exit 0]", "a fresh sandbox"
            assert env.call_tool("submit")["reward"] == 0.0

        # OpenEnv's generic client (plain dicts): the reset answers the instruction; an episode is left
        # open when the server stops.
        left_open = GenericEnvClient(base_url=url, message_timeout_s=600).sync()
        left_open.connect()
        turned = left_open.reset(task_id=task_id)
        assert turned.observation["task_id"] == task_id and not turned.observation["error"]
        assert row["problem_statement"].strip()[:40] in turned.observation["output"]
        unknown = left_open.reset(task_id="acme__nothing-1")
        assert unknown.observation["error"] and unknown.done and "unknown task id" in unknown.observation["output"]
        left_open.reset()
        listing = left_open.step({"type": "call_tool", "tool_name": "bash",
                                  "arguments": {"command": "git log --oneline | wc -l"}})
        assert listing.observation["result"]["data"].startswith("1\n"), "a one-commit repository"
        assert left_open.state()["step_count"] == 1
        # A refusal as a client of plain dicts sees it: the tool's error in `result`, no `error` of the call.
        refused = left_open.step({"type": "call_tool", "tool_name": "read_file", "arguments": {"path": "/etc/passwd"}})
        assert refused.observation["result"]["is_error"] is True and refused.observation["error"] is None
        assert refused.observation["result"]["data"].startswith("error: ") and not refused.done
        assert _sandboxes_of(docker_client, server), "the open episode has its sandbox"

        # HTTP: each request is its own environment (OpenEnv's HTTP semantics); mistakes are errors, not crashes.
        reset = requests.post(f"{url}/reset", json={"task_id": task_id}, timeout=120)
        assert reset.status_code == 200 and row["problem_statement"].strip()[:40] in reset.json()["observation"]["output"]
        stepped = requests.post(f"{url}/step", timeout=60, json={"action": {
            "type": "call_tool", "tool_name": "bash", "arguments": {"command": "ls"}}})
        assert stepped.status_code == 200 and "no episode" in stepped.json()["observation"]["error"]["message"]
        assert requests.post(f"{url}/step", json={"action": {"verb": "ls"}}, timeout=60).status_code == 422
        assert requests.get(f"{url}/state", timeout=60).json()["step_count"] == 0
        schema = requests.get(f"{url}/schema", timeout=60).json()
        assert {"tool_name", "arguments"} <= set(schema["action"]["properties"])
        # MCP's JSON-RPC: the tools with their schemas, from RepoEnv's signatures and docstrings.
        listed = requests.post(f"{url}/mcp", timeout=60,
                               json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).json()
        assert {tool["name"] for tool in listed["result"]["tools"]} == TOOL_NAMES
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
    assert not _sandboxes_of(docker_client, server), "no sandbox outlives the server"
    assert list(started_in.iterdir()) == [], "serve writes nothing into the folder it started in"
    assert list((cache / "repo_env").iterdir()), "the gradings' logs went to repo2env's cache"


@pytest.mark.docker
def test_serve_grades_a_javascript_task_gold_1_and_empty_0(accepted_js_task, tmp_path):
    """A published fmtkit (mocha) task served over OpenEnv, driven by its MCP client: the gold patch
    applied and submitted earns 1.0, an empty episode 0.0, graded as `repo2env grade` grades it."""
    _require_openenv()
    from openenv.core.mcp_client import MCPToolClient

    from repo2env.publish.dataset import PublishOptions, publish_to_folder

    folder, task = accepted_js_task
    dataset = tmp_path / "js-envs"
    publish_to_folder([folder], dataset, PublishOptions(name="js-envs"))
    started_in = tmp_path / "cwd"
    started_in.mkdir()
    server, url = _start([BINARY, "serve", "--dataset", str(dataset), "--port", "{port}"], started_in,
                         {"REPO2ENV_CACHE": str(tmp_path / "cache")})
    try:
        with MCPToolClient(base_url=url, message_timeout_s=600).sync() as env:
            assert not env.reset(task_id=task.instance_id).done
            assert "wrote" in env.call_tool("write_file", path="fix.diff", content=task.patch)
            assert env.call_tool("bash", command="git apply fix.diff && rm fix.diff").endswith("[exit 0]")
            graded = env.call_tool("submit")
            assert graded["reward"] == 1.0, graded
            env.reset(task_id=task.instance_id)
            graded = env.call_tool("submit")
            assert graded["reward"] == 0.0 and graded["f2p_rate"] == 0.0, graded
    finally:
        output = _stop(server, signal.SIGTERM)
    assert "Traceback" not in output, output


@pytest.fixture(scope="module")
def exported_package(published, tmp_path_factory):
    """`repo2env export openenv` of the published demo, no wheel given, installed from its own uv.lock
    into its own virtualenv (`uv sync --frozen`, one of OpenEnv's deployment modes)."""
    dataset, _ = published
    package = tmp_path_factory.mktemp("openenv") / "package"
    done = subprocess.run([BINARY, "export", "openenv", str(package), "--dataset", str(dataset), "--name", "demo-envs"],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0 and "uv lock failed" in done.stderr:
        unavailable(f"uv cannot lock the package here (is the package index reachable?): {done.stderr[-500:]}")
    assert done.returncode == 0, done.stderr
    synced = subprocess.run([str(Path(sys.executable).with_name("uv")), "sync", "--frozen", "--no-progress",
                             "--directory", str(package)], capture_output=True, text=True, timeout=1800)
    if synced.returncode != 0:
        unavailable(f"uv sync of the exported package failed (is the package index reachable?): {synced.stderr[-500:]}")
    return package


@pytest.mark.docker
def test_exported_package_passes_openenv_validate_and_serves_from_its_lock(exported_package, published, tmp_path):
    import tomllib

    import yaml
    from openenv.core.mcp_client import MCPToolClient

    dataset, rows = published
    package = exported_package
    manifest = yaml.safe_load((package / "openenv.yaml").read_text())
    assert manifest == {"spec_version": 1, "name": "demo-envs", "type": "space", "runtime": "fastapi",
                        "app": "server.app:app", "port": 8000}
    project = tomllib.loads((package / "pyproject.toml").read_text())
    assert project["project"]["scripts"] == {"server": "server.app:main"}
    [wheel] = [path.name for path in (package / "wheels").glob("*.whl")]
    assert wheel.startswith("repo2env_rl-"), "this checkout's own wheel, built for the package"
    assert project["tool"]["uv"]["sources"]["repo2env-rl"] == {"path": f"wheels/{wheel}"}
    assert f'filename = "{wheel}", hash = "sha256:' in (package / "uv.lock").read_text(), "the lock pins its hash"
    assert (package / "dataset" / "manifest.json").read_bytes() == (dataset / "manifest.json").read_bytes()
    openenv = str(package / ".venv" / "bin" / "openenv")  # OpenEnv's own validator, from the package's environment
    validated = subprocess.run([openenv, "validate", str(package), "--json"], capture_output=True, text=True,
                               timeout=300)
    assert validated.returncode == 0 and json.loads(validated.stdout)["passed"], validated.stdout + validated.stderr
    again = subprocess.run([BINARY, "export", "openenv", str(package), "--dataset", str(dataset)],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and "exists and is not empty" in again.stderr

    # The project's own script, from its own virtualenv, serves the copied dataset.
    server, url = _start([str(package / ".venv" / "bin" / "server")], tmp_path,
                         {"REPO2ENV_ENV_LOGS_DIR": str(tmp_path / "logs")})
    try:
        report = subprocess.run([openenv, "validate", "--url", url], capture_output=True, text=True, timeout=300)
        assert report.returncode == 0 and json.loads(report.stdout)["passed"], report.stdout
        with MCPToolClient(base_url=url, message_timeout_s=600).sync() as env:
            env.reset(task_id=next(iter(rows)))
            assert env.call_tool("submit")["reward"] == 0.0
        # The package README's examples, run as they are written (the task and the port filled in)
        # with the package's own Python: each client does what the README says it does.
        task_id, row = next(iter(rows.items()))
        readme = (package / "README.md").read_text()
        [tools_example, instruction_example] = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
        assert 'metadata["instruction"]' not in readme

        def run_example(code: str) -> list[str]:
            script = code.replace("http://localhost:8000", url).replace("<instance_id>", task_id)
            ran = subprocess.run([str(package / ".venv" / "bin" / "python"), "-c", script], capture_output=True,
                                 text=True, timeout=900)
            assert ran.returncode == 0, ran.stderr
            return ran.stdout.splitlines()

        printed = run_example(tools_example)
        assert set(ast.literal_eval(printed[0])) == TOOL_NAMES, printed
        assert printed[-2].startswith("error: ") and "outside /testbed" in printed[-2], "the refusal, as text"
        assert printed[-1] == "0.0"
        printed = run_example(instruction_example)
        assert row["problem_statement"].strip()[:40] in "\n".join(printed), "the instruction"
        assert printed[-1] == "0.0 True"
    finally:
        _stop(server)


@pytest.mark.docker
@pytest.mark.slow
def test_exported_package_image_builds_with_no_wheel_given_and_serves(exported_package, docker_client):
    """The package's Dockerfile as a user builds it: on a local base image (Docker Hub's python image
    is not reachable here), the build's index settings as build arguments; the container serves with
    the host's Docker socket."""
    import requests

    from repo2env.runtime.bootstrap import base_image_tag
    from repo2env.runtime.images import image_namespace
    from repo2env.runtime.package_access import PackageAccess

    tag = f"{image_namespace()}-openenv/package:demo-envs"
    docker_client.images.build(path=str(exported_package), tag=tag, rm=True, forcerm=True, timeout=1800,
                               buildargs={"BASE_IMAGE": base_image_tag("3.11"),
                                          **PackageAccess.from_environment().container_env()})
    port = _free_port()
    container = docker_client.containers.run(tag, detach=True, ports={"8000/tcp": ("127.0.0.1", port)},
                                             volumes={"/var/run/docker.sock": {"bind": "/var/run/docker.sock"}},
                                             environment={"REPO2ENV_IMAGE_NAMESPACE": image_namespace()})
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, container.logs().decode()[-3000:]
            time.sleep(1)
        listed = requests.post(f"http://127.0.0.1:{port}/mcp", timeout=60,
                               json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).json()
        assert {tool["name"] for tool in listed["result"]["tools"]} == TOOL_NAMES
    finally:
        container.remove(force=True)
        docker_client.images.remove(tag, force=True)
