"""The JavaScript runner adapters against the real runners, in the Node 18 base image.

One container (with network) for the session: each runner's project is written, its runner
installed from the npm registry (one ``npm install`` per runner, all at once), then the requested
ids run through :func:`plan_run` and the reports are read back with :func:`read_outcomes`.
``npm install --before`` is tested against a registry server started in the same container
with true (and with false) publication dates.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shlex
import tarfile
from datetime import UTC, datetime

import pytest
from javascript_projects import (
    PACKAGES,
    PROJECTS_ROOT,
    REPORTS_DATA,
    never_requested,
    project_files,
    requested,
)

from repo2env.languages.javascript.environment import (
    DatePin,
    PackageManager,
    date_pin,
    install_commands,
    install_failure_reason,
)
from repo2env.languages.javascript.runners import (
    RUNNERS,
    STREAM_RUNNERS,
    plan_run,
    read_outcomes,
    reported_outcomes,
    reporter_sources,
    script_invocation,
    streamed_outcomes,
)
from repo2env.outcomes import TestStatus

pytestmark = [pytest.mark.docker, pytest.mark.slow]



def _archive(files: dict[str, str | bytes], *, owner: int = 1000) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        directories = set()
        for path in files:
            parts = path.split("/")[:-1]
            directories.update("/".join(parts[:index + 1]) for index in range(len(parts)))
        for directory in sorted(directories):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, owner, owner
            tar.addfile(info)
        for path, content in files.items():
            payload = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.uid, info.gid = len(payload), 0o644, owner, owner
            tar.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


@pytest.fixture(scope="session")
def node_sandbox(docker_client):
    """A running Node 18 container with every runner's project written and installed."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.node_bootstrap import ensure_node_base_image
    from repo2env.runtime.sandbox import SandboxLimits

    runtime = DockerBackend(docker_client)
    image = ensure_node_base_image(runtime, "18")
    sandbox = runtime.start_image(image.tag, limits=SandboxLimits(network=True, memory="3g", cpus=2.0, pids=2048,
                                                                   exec_timeout_s=900), workdir="/home/agent")
    try:
        files = {f"js/{runner}/{path}": text for runner in RUNNERS for path, text in project_files(runner).items()}
        sandbox.put_archive("/home/agent", _archive(files))
        reporters = {path.removeprefix("/opt/"): text for path, text in reporter_sources().items()}
        sandbox.put_archive("/opt", _archive(reporters, owner=0))
        installs = " & ".join(
            f"(cd {PROJECTS_ROOT}/{runner} && npm install --no-audit --no-fund --no-save --loglevel=error "
            f"{' '.join(packages)} > install.log 2>&1; echo {runner} $? >> {PROJECTS_ROOT}/installed)"
            for runner, packages in PACKAGES.items() if packages)
        result = sandbox.exec(f"{installs}; wait; cat {PROJECTS_ROOT}/installed", timeout=900)
        failed = [line for line in result.output.splitlines() if line.split()[-1:] != ["0"]]
        assert not failed and result.exit_code == 0, f"npm install failed: {result.output}"
        yield sandbox
    finally:
        sandbox.close()


def _run(sandbox, runner: str, test_ids: list[str], tag: str):
    project = f"{PROJECTS_ROOT}/{runner}"
    files = project_files(runner)
    invocation = script_invocation(json.loads(files["package.json"]), runner)
    plan = plan_run(runner, test_ids, f"/tmp/reports-{runner}-{tag}", root=project, invocation=invocation)
    result = sandbox.exec(plan.command, timeout=600)
    assert result.exit_code == 0, result.output

    def read(path: str) -> str | None:
        try:
            return sandbox.read_file(path)
        except FileNotFoundError:
            return None

    return plan, read, result


@pytest.mark.parametrize("runner", RUNNERS)
def test_the_runner_reports_every_requested_outcome(node_sandbox, runner):
    expected = requested(runner)
    plan, read, result = _run(node_sandbox, runner, list(expected), "all")
    outcomes = read_outcomes(plan, read, root=f"{PROJECTS_ROOT}/{runner}")
    assert outcomes == expected, result.output
    if os.environ.get("REPO2ENV_RECORD_JS_REPORTS"):
        folder = REPORTS_DATA / runner
        folder.mkdir(parents=True, exist_ok=True)
        for number, report in enumerate(plan.reports):
            text = read(report.path)
            if text is not None:
                (folder / f"{number}-{report.format}").write_text(text)
        (folder / "plan.json").write_text(json.dumps({
            "root": f"{PROJECTS_ROOT}/{runner}", "test_ids": list(plan.test_ids),
            "reports": [{"name": f"{number}-{report.format}", "format": report.format, "file": report.file}
                        for number, report in enumerate(plan.reports)]}, indent=2))


@pytest.mark.parametrize("runner", sorted(STREAM_RUNNERS))
def test_the_live_stream_gives_what_the_reports_give(node_sandbox, runner):
    """Run as a grading runs it (a reader on a FIFO the plan opens as descriptor 9), each streaming
    runner's reporters send every outcome its reports hold: read back, the same outcomes."""
    expected = requested(runner)
    project = f"{PROJECTS_ROOT}/{runner}"
    invocation = script_invocation(json.loads(project_files(runner)["package.json"]), runner)
    folder = f"/tmp/stream-{runner}"
    plan = plan_run(runner, list(expected), f"{folder}/reports", root=project, invocation=invocation,
                    outcome_fifo=f"{folder}/outcomes.fifo")
    assert plan.outcome_stream
    result = node_sandbox.exec(f"rm -rf {folder} && mkdir -p {folder} && mkfifo {folder}/outcomes.fifo && "
                               f"{{ cat {folder}/outcomes.fifo > {folder}/stream & }} && reader=$! && "
                               f"/bin/sh -c {shlex.quote(plan.command)}; wait $reader", timeout=600)
    assert result.exit_code == 0, result.output

    def read(path: str) -> str | None:
        try:
            return node_sandbox.read_file(path)
        except FileNotFoundError:
            return None

    stream = read(f"{folder}/stream")
    assert read_outcomes(plan, read, root=project) == expected, result.output
    assert streamed_outcomes(plan, stream, root=project) == expected, (stream, result.output)


@pytest.mark.parametrize("runner", [runner for runner in RUNNERS if runner != "tape"])  # tape has no filter
def test_titles_select_the_tests_that_run(node_sandbox, runner):
    chosen = [test for test, status in requested(runner).items()
              if status == TestStatus.PASSED and test.startswith("test/format.test.js::")]
    plan, read, _ = _run(node_sandbox, runner, chosen, "some")
    assert set(read_outcomes(plan, read, root=f"{PROJECTS_ROOT}/{runner}").values()) == {TestStatus.PASSED}
    # The file's failing test was not asked for, so it did not run: jest, vitest, jasmine and node
    # list it as skipped, mocha and ava do not name it.
    reported = reported_outcomes(plan, read, root=f"{PROJECTS_ROOT}/{runner}")
    assert reported.get(never_requested(runner)) == (None if runner in ("mocha", "ava") else TestStatus.SKIPPED)
    assert TestStatus.FAILED not in reported.values()


def test_a_mocha_run_ends_when_its_tests_leave_a_server_listening(node_sandbox):
    """mocha 4+ waits for open handles after its end; the project's harness exits for it (axios
    2020-2021: grunt), so each run passes --exit (a mocha before 4 exited anyway and refuses it)."""
    project = f"{PROJECTS_ROOT}/mocha"
    source = ("const http = require('http');\nconst assert = require('assert');\n"
              "describe('server', () => {\n  it('listens', (done) => {\n"
              "    http.createServer(() => {}).listen(0, done);\n  });\n"
              "  it('answers', () => assert.strictEqual(1 + 1, 2));\n});\n")
    node_sandbox.put_archive(project, _archive({"test/server.test.js": source}))
    plan = plan_run("mocha", ["test/server.test.js::server > listens", "test/server.test.js::server > answers"],
                    "/tmp/reports-mocha-server", root=project)
    result = node_sandbox.exec(f"timeout 60 sh -c {shlex.quote(plan.command)}; echo status $?", timeout=120)
    assert result.output.strip().endswith("status 0"), result.output

    def read(path: str) -> str | None:
        try:
            return node_sandbox.read_file(path)
        except FileNotFoundError:
            return None

    assert set(read_outcomes(plan, read, root=project).values()) == {TestStatus.PASSED}
    # Without it the same run waits for the server until it is killed.
    hung = plan.command.replace("$(node -e", "$(true || node -e", 1)
    assert hung != plan.command
    result = node_sandbox.exec(f"timeout 20 sh -c {shlex.quote(hung)}; echo status $?", timeout=120)
    assert result.output.strip().endswith("status 124"), result.output


def test_a_mocha_before_4_reports_titles_without_title_path(node_sandbox):
    """mocha 3 has no Runnable#titlePath (express 2018 pins mocha 3.5.3): the reporter walks the
    parents instead, so nested describe titles, passes and failures come out as with mocha 10, in
    the report and in the live stream."""
    project = "/home/agent/js-mocha3"
    source = ("const assert = require('assert');\n"
              "describe('outer', function () {\n  describe('inner', function () {\n"
              "    it('passes', function () { assert.strictEqual(1, 1); });\n"
              "    it('fails', function () { assert.strictEqual(1, 2); });\n  });\n});\n"
              "it('top level', function () {});\n")
    node_sandbox.put_archive("/home/agent", _archive({
        "js-mocha3/package.json": json.dumps({"name": "old-mocha", "scripts": {"test": "mocha"}}),
        "js-mocha3/test/old.test.js": source}))
    installed = node_sandbox.exec(f"cd {project} && npm install --no-audit --no-fund --no-save --loglevel=error "
                                  "mocha@3.5.3 && node_modules/.bin/mocha --version", timeout=600)
    assert installed.exit_code == 0 and installed.output.strip().endswith("3.5.3"), installed.output
    ids = ["test/old.test.js::outer > inner > passes", "test/old.test.js::outer > inner > fails",
           "test/old.test.js::top level"]
    plan = plan_run("mocha", ids, "/tmp/reports-mocha3", root=project)
    result = node_sandbox.exec(f"timeout 120 sh -c {shlex.quote(plan.command)}", timeout=300)

    def read(path: str) -> str | None:
        try:
            return node_sandbox.read_file(path)
        except FileNotFoundError:
            return None

    expected = {ids[0]: TestStatus.PASSED, ids[1]: TestStatus.FAILED, ids[2]: TestStatus.PASSED}
    assert read_outcomes(plan, read, root=project) == expected, result.output
    # Streamed as a grading streams: mocha 3's bin/mocha would run the tests in a child that has no
    # stream (Node makes inherited descriptors close-on-exec), so the plan runs _mocha itself.
    folder = "/tmp/stream-mocha3"
    streamed = plan_run("mocha", ids, f"{folder}/reports", root=project, outcome_fifo=f"{folder}/outcomes.fifo")
    result = node_sandbox.exec(f"rm -rf {folder} && mkdir -p {folder} && mkfifo {folder}/outcomes.fifo && "
                               f"{{ cat {folder}/outcomes.fifo > {folder}/stream & }} && reader=$! && "
                               f"timeout 120 /bin/sh -c {shlex.quote(streamed.command)}; wait $reader", timeout=300)
    assert streamed_outcomes(streamed, read(f"{folder}/stream"), root=project) == expected, result.output
    assert read_outcomes(streamed, read, root=project) == expected, result.output


def _tarball(name: str, version: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, text in {"package/package.json": json.dumps({"name": name, "version": version, "main": "index.js"}),
                           "package/index.js": f"module.exports = {version!r};\n"}.items():
            payload = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(payload), 0o644
            tar.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


_REGISTRY_SERVER = """\
import http.server, sys, os
root = sys.argv[2]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = os.path.join(root, self.path.lstrip('/').replace('/-/', '/tarballs/'))
        if os.path.isdir(path):
            path = os.path.join(path, 'packument.json')
        if not os.path.isfile(path):
            self.send_response(404); self.end_headers(); return
        body = open(path, 'rb').read()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json' if path.endswith('.json') else 'application/octet-stream')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), Handler).serve_forever()
"""


def _registry_files(port: int, times: dict[str, str]) -> dict[str, str | bytes]:
    """A registry tree for one package ``tinypkg`` with versions 1.0.0 and 1.1.0."""
    files: dict[str, str | bytes] = {"server.py": _REGISTRY_SERVER}
    versions = {}
    for version in times:
        tarball = _tarball("tinypkg", version)
        files[f"tinypkg/tarballs/tinypkg-{version}.tgz"] = tarball
        versions[version] = {
            "name": "tinypkg", "version": version, "main": "index.js",
            "dist": {"tarball": f"http://127.0.0.1:{port}/tinypkg/-/tinypkg-{version}.tgz",
                     "shasum": hashlib.sha1(tarball).hexdigest(),
                     "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()}}
    files["tinypkg/packument.json"] = json.dumps({
        "name": "tinypkg", "dist-tags": {"latest": max(times)}, "versions": versions,
        "time": {"created": min(times.values()), "modified": max(times.values()), **times}})
    return files


@pytest.mark.parametrize(("times", "expected"), [
    ({"1.0.0": "2020-03-01T00:00:00.000Z", "1.1.0": "2022-03-01T00:00:00.000Z"}, "1.0.0"),
    # A mirror's ingestion dates: every version "published" after the pin date.
    ({"1.0.0": "2024-11-22T00:00:00.000Z", "1.1.0": "2024-11-22T00:00:00.000Z"}, "registry_dates"),
], ids=["true-dates", "mirror-dates"])
def test_npm_install_before_picks_what_the_registry_had_that_day(node_sandbox, times, expected):
    port = 4873 if expected == "1.0.0" else 4874
    home = f"/home/agent/registry-{port}"
    node_sandbox.exec(f"mkdir -p {home}/project")
    node_sandbox.put_archive(home, _archive(_registry_files(port, times)))
    package = {"name": "uses-tinypkg", "version": "1.0.0", "dependencies": {"tinypkg": "^1.0.0"}}
    node_sandbox.write_file(f"{home}/project/package.json", json.dumps(package))
    pin = date_pin({"package.json": json.dumps(package)}, datetime(2021, 1, 1, tzinfo=UTC))
    assert pin == DatePin("before", "2021-01-01T00:00:00Z")
    (command,) = install_commands(PackageManager("npm", None, None, "no lock file"), pin)
    result = node_sandbox.exec(
        f"cd {home} && (python3 server.py {port} {home} & echo $! > server.pid) && sleep 1 && cd project && "
        f"npm_config_registry=http://127.0.0.1:{port}/ npm_config_cache={home}/cache {command}; status=$?; "
        f"kill $(cat {home}/server.pid); "
        f"cat node_modules/tinypkg/package.json 2>/dev/null; exit $status", timeout=300)
    if expected == "registry_dates":
        assert result.exit_code != 0 and install_failure_reason(result.output) == "registry_dates", result.output
    else:
        assert result.exit_code == 0, result.output
        assert f'"version": "{expected}"' in result.output or f'"version":"{expected}"' in result.output


def test_the_node_base_image_keeps_the_python_base_guarantees(node_sandbox):
    result = node_sandbox.exec("id -u; node --version; npm --version; git --version; /usr/bin/python3 --version; "
                               "test -d /testbed && stat -c %U /testbed; echo $NODE_EXTRA_CA_CERTS")
    lines = result.output.splitlines()
    assert lines[0] == "1000" and lines[1].startswith("v18.") and lines[3].startswith("git version")
    assert lines[4].startswith("Python 3.11") and lines[5] == "agent"
    assert lines[6] == "" or lines[6].startswith("/etc/ssl/certs/")
