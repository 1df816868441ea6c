"""The build's watchdog (repo2env/runtime/watchdog.py), run as the images run it: by a system Python,
around real commands, with a real server that accepts a connection and never answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from repo2env.languages.build import WATCHDOG_MARKER, watchdog_verdict
from repo2env.runtime.watchdog import MARKER, STALLED, TIMED_OUT

WATCHDOG = Path(__file__).resolve().parents[1] / "repo2env" / "runtime" / "watchdog.py"


def watch(*command: str, idle: float = 2, timeout: float | None = None, env: dict | None = None):
    limit = ["--timeout", str(timeout)] if timeout else []
    return subprocess.run([sys.executable, "-I", "-S", str(WATCHDOG), "--idle", str(idle), *limit, "--", *command],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def silent_host():
    """A TCP server on localhost that accepts connections and never sends a byte: its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    held: list = []
    threading.Thread(target=lambda: held.extend(server.accept() for _ in range(2)), daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def test_a_command_waiting_on_a_silent_host_is_stopped_and_the_host_named(silent_host):
    began = time.monotonic()
    result = watch(sys.executable, "-c", "import socket; print('fetching', flush=True); "
                   f"socket.create_connection(('localhost', {silent_host})).recv(1)")
    assert result.returncode == STALLED
    assert time.monotonic() - began < 20
    assert result.stdout.startswith("fetching")
    verdict = watchdog_verdict(result.stdout)
    assert verdict.startswith("stalled after 2 s without output, CPU or network progress")
    assert f"waiting on localhost:{silent_host} (127.0.0.1, connected, nothing arriving)" in verdict


def test_work_that_progresses_is_left_alone_and_its_status_kept():
    busy = watch(sys.executable, "-c", "import time\nend = time.time() + 5\nwhile time.time() < end: pass\n")
    assert busy.returncode == 0 and watchdog_verdict(busy.stdout) is None, "CPU work is progress"
    chatty = watch("sh", "-c", "for i in 1 2 3 4 5; do echo $i; sleep 1; done; exit 3")
    assert chatty.returncode == 3 and chatty.stdout.split() == ["1", "2", "3", "4", "5"], "output is progress"
    assert watchdog_verdict(chatty.stdout) is None


def test_a_quiet_retry_loop_stalls_and_a_long_command_times_out(silent_host):
    retrying = watch(sys.executable, "-c", "import time\nwhile True:\n    time.sleep(0.2)\n")
    assert retrying.returncode == STALLED
    slow = watch("sh", "-c", "while true; do echo tick; sleep 0.5; done", idle=10, timeout=3)
    assert slow.returncode == TIMED_OUT and watchdog_verdict(slow.stdout) == "timed out after 3 s"


def test_the_environments_own_sitecustomize_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['THEIRS'] = 'ran'\n")
    result = watch(sys.executable, "-c", "import os; print(os.environ.get('THEIRS'))",
                   env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0 and result.stdout.strip() == "ran", result.stderr


def test_the_watchdog_leaves_nothing_in_the_temporary_folder(tmp_path):
    """Its hooks' folder goes when it ends, stopped or not: nothing of it stays in an image."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    assert watch("sh", "-c", "ls \"$TMPDIR\"", env=env).stdout.startswith("repo2env-watchdog-"), "its folder, while it runs"
    assert watch("sh", "-c", "sleep 30", env=env).returncode == STALLED
    assert list(tmp_path.iterdir()) == []


def test_the_build_reads_the_line_the_standalone_script_writes():
    """The script is shipped alone into images, so it keeps its own copy of the marker."""
    assert MARKER == WATCHDOG_MARKER
