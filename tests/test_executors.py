"""The executors behind the batch pipeline: one behavioural suite over the local pool and Ray.

Ray runs as a real head on this machine (one per module, two CPUs, a small object store, no
network beyond the loopback). The task functions below are module-level, as the pipeline's stage
functions are; Ray gets them by value since its workers cannot import this test module by name.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

from repo2env.errors import (
    InputError,
    Repo2EnvError,
    TaskCancelledError,
    TaskCrashedError,
    TaskTimeoutError,
)
from repo2env.models import ExecResult
from repo2env.pipeline.executors import LocalExecutor, RayExecutor, Resources, make_executor, task_traceback

BASE = "repo2env/base:py3.11"

# -- tasks (run in worker processes) --------------------------------------------------------------


def add(left, right, *, times=1):
    return (left + right) * times


def exec_result(text):
    return ExecResult(exit_code=0, output=text, duration_s=0.5)


def _deep_failure(value):
    raise ValueError(f"bad value {value}")


def fail(value):
    _deep_failure(value)


def fail_with_hint():
    raise InputError("the spec names no repository", hint="add one under repos:")


def crash(runs_file):
    with open(runs_file, "a") as runs:
        runs.write("ran\n")
    os._exit(3)


def sleep_then_mark(marker, seconds):
    try:
        time.sleep(seconds)
    finally:
        Path(marker).write_text("cleaned up")


def meet(folder, me, other, wait_s):
    """True when ``other`` runs at the same time as this task (within ``wait_s``): each says it runs
    and stays until the other has seen it, so both answer True, or it gives up alone."""
    mine, theirs = Path(folder, f"{me}.running"), Path(folder, f"{other}.running")
    mine.touch()
    try:
        saw, deadline = False, time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not saw and theirs.exists():
                saw = True
                Path(folder, f"{me}.saw").touch()
            if saw and Path(folder, f"{other}.saw").exists():
                break
            time.sleep(0.02)
        return saw
    finally:
        mine.unlink()


def block_until_released(folder, name):
    """Runs until ``folder/release`` appears; says it started, and cleans up however it ends."""
    Path(folder, f"{name}.started").touch()
    try:
        while not Path(folder, "release").exists():
            time.sleep(0.05)
        return name
    finally:
        Path(folder, f"{name}.cleaned").touch()


def echo_in_sandbox(image):
    """Start a sandbox through repo2env's runtime on the worker's node and run one command."""
    from repo2env.runtime.backends.docker import DockerBackend

    with DockerBackend().start_image(image, labels={"repo2env.test": "executors"}) as sandbox:
        return sandbox.exec("echo hello from $(id -un) in $(pwd); exit 4"), os.getpid()


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_head():
    """A Ray head on this machine for the whole module, started (and stopped) by a RayExecutor.
    Ray is part of ``make install``: in CI its absence is a failure, never a skip."""
    try:
        import ray.cloudpickle
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("Ray is required in CI: make install installs the ray extra")
        pytest.skip("Ray is not installed: pip install -e '.[ray]'")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    head = RayExecutor(address=None, num_cpus=2, object_store_memory=80 * 2**20, grace_s=2.0)
    yield head
    head.shutdown()
    assert not ray.is_initialized()
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(params=["local", "ray"])
def make(request):
    """Makes executors of one kind with two CPUs; each is shut down (cancelling) after the test."""
    made = []

    def factory(**options):
        if request.param == "local":
            executor = LocalExecutor(jobs=2, **{"grace_s": 2.0, **options})
        else:
            request.getfixturevalue("ray_head")
            executor = RayExecutor(address=None, **{"grace_s": 2.0, **options})  # joins the module's head
        made.append(executor)
        return executor

    yield factory
    for executor in made:
        executor.shutdown(cancel=True)


def ended_by_cancel(future) -> bool:
    if future.cancelled():
        return True
    try:
        future.result(timeout=0)
    except TaskCancelledError:
        return True
    except (CancelledError, Exception):
        return False
    return False


# -- the behavioural suite ------------------------------------------------------------------------


def test_results_come_back_in_order_with_their_types(make):
    executor = make()
    futures = [executor.submit(add, index, 1, times=10) for index in range(8)]
    assert [future.result(timeout=60) for future in futures] == [(index + 1) * 10 for index in range(8)]
    result = executor.submit(exec_result, "done").result(timeout=60)
    assert result == ExecResult(exit_code=0, output="done", duration_s=0.5)


def test_an_exception_comes_back_with_its_type_message_and_the_worker_traceback(make):
    executor = make()
    error = executor.submit(fail, 7).exception(timeout=60)
    assert type(error) is ValueError and str(error) == "bad value 7"
    text = task_traceback(error)
    assert text is not None and "_deep_failure" in text and "ValueError: bad value 7" in text
    hinted = executor.submit(fail_with_hint).exception(timeout=60)
    assert isinstance(hinted, InputError) and hinted.hint == "add one under repos:"


def test_one_failure_does_not_stop_the_others(make, tmp_path):
    executor = make()
    marker = tmp_path / "timed-out-task"
    started = time.monotonic()
    futures = {
        "first": executor.submit(add, 1, 1),
        "raises": executor.submit(fail, 1),
        "crashes": executor.submit(crash, str(tmp_path / "crash-runs")),
        "times out": executor.submit(sleep_then_mark, str(marker), 60, resources=Resources(timeout_s=1.0)),
        "last": executor.submit(add, 2, 2),
    }
    assert futures["first"].result(timeout=60) == 2
    assert futures["last"].result(timeout=60) == 4
    assert isinstance(futures["raises"].exception(timeout=60), ValueError)
    assert isinstance(futures["crashes"].exception(timeout=60), TaskCrashedError)
    assert (tmp_path / "crash-runs").read_text() == "ran\n"  # not run again behind the caller's back
    timed_out = futures["times out"].exception(timeout=60)
    assert isinstance(timed_out, TaskTimeoutError) and "1 s" in str(timed_out)
    assert time.monotonic() - started < 30  # the timeout stopped the 60 s task
    assert marker.read_text() == "cleaned up"  # stopped from inside: its finally block ran
    assert executor.submit(add, 3, 3).result(timeout=60) == 6  # the executor goes on


def test_a_task_is_started_only_when_its_resources_are_free(make, tmp_path):
    executor = make()
    # One CPU each on two: both run at once.
    pair = [executor.submit(meet, str(tmp_path), me, other, 30, resources=Resources(cpus=1))
            for me, other in (("a", "b"), ("b", "a"))]
    assert [future.result(timeout=60) for future in pair] == [True, True]
    # Two CPUs each, or 60 % of the memory each: one after the other, never together.
    memory = int(executor.capacity.memory_bytes * 0.6)
    for round, reserved in enumerate((Resources(cpus=2), Resources(cpus=0.5, memory_bytes=memory))):
        me, other = f"c{round}", f"d{round}"
        pair = [executor.submit(meet, str(tmp_path), me, other, 1.5, resources=reserved),
                executor.submit(meet, str(tmp_path), other, me, 1.5, resources=reserved)]
        assert [future.result(timeout=60) for future in pair] == [False, False], reserved
    # More than any node has: refused at once, with what to do.
    with pytest.raises(InputError, match="CPUs") as refused:
        executor.submit(add, 1, 1, resources=Resources(cpus=3))
    assert refused.value.hint


@pytest.mark.alone  # its timing does not hold beside two other workers (seen in a parallel run)
def test_shutdown_with_cancel_stops_the_running_task_and_drops_the_queued_ones(make, tmp_path):
    executor = make()
    everything = Resources(cpus=2)  # one task at a time
    futures = [executor.submit(block_until_released, str(tmp_path), f"task{index}", resources=everything)
               for index in range(4)]
    deadline = time.monotonic() + 60
    while not (tmp_path / "task0.started").exists():
        assert time.monotonic() < deadline, "the first task never started"
        time.sleep(0.05)
    started = time.monotonic()
    executor.shutdown(cancel=True)
    assert time.monotonic() - started < 15
    assert all(future.done() for future in futures)
    assert isinstance(futures[0].exception(timeout=0), TaskCancelledError)
    assert (tmp_path / "task0.cleaned").exists()  # stopped from inside: its finally block ran
    assert all(ended_by_cancel(future) for future in futures[1:])
    assert not any((tmp_path / f"task{index}.started").exists() for index in (1, 2, 3))
    with pytest.raises(RuntimeError, match="shut down"):
        executor.submit(add, 1, 1)


def test_shutdown_without_cancel_waits_for_every_task(make):
    executor = make()
    futures = [executor.submit(add, index, 0) for index in range(4)]
    executor.shutdown()
    assert [future.result(timeout=0) for future in futures] == [0, 1, 2, 3]


# -- the parts that are not per executor ----------------------------------------------------------


def test_resources_and_executor_names_are_checked_with_what_to_do():
    with pytest.raises(InputError):
        Resources(cpus=-1)
    with pytest.raises(InputError):
        Resources(memory_bytes=0)
    with pytest.raises(InputError):
        Resources(timeout_s=0)
    with pytest.raises(InputError, match="unknown executor 'dask'") as unknown:
        make_executor("dask")
    assert "local, ray" in unknown.value.hint
    with pytest.raises(InputError, match="options"):
        make_executor("local", workers=2)
    with pytest.raises(InputError, match="options"):
        make_executor("ray", adress="auto")  # refused before anything connects
    with pytest.raises(InputError, match="--jobs 0"):
        make_executor("local", jobs=0)
    with make_executor("local", jobs=1) as executor:
        assert isinstance(executor, LocalExecutor) and executor.submit(add, 1, 2).result(timeout=60) == 3


def test_a_task_that_cannot_travel_is_refused_at_submit():
    with LocalExecutor(jobs=1) as executor, pytest.raises(InputError, match="module-level function"):
        executor.submit(lambda: 1)


def test_a_task_that_ignores_its_timeout_is_killed_after_the_grace(make):
    executor = make(grace_s=0.5)
    future = executor.submit(ignore_timeouts, resources=Resources(timeout_s=0.5))
    error = future.exception(timeout=30)
    assert isinstance(error, TaskTimeoutError) and "killed" in str(error)
    assert executor.submit(add, 1, 2).result(timeout=30) == 3


def ignore_timeouts():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except Repo2EnvError:
            pass  # a stage with a broad except swallows the timeout: the executor must still stop it


def test_local_workers_do_not_outlive_a_runner_killed_with_sigkill(tmp_path):
    pid_file = tmp_path / "worker.pid"
    runner = subprocess.Popen([sys.executable, "-c", RUNNER_SCRIPT, str(pid_file)], cwd=Path(__file__).parent)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert runner.poll() is None and time.monotonic() < deadline, "the runner never started its task"
            time.sleep(0.05)
        worker_pid = int(pid_file.read_text())
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 10
        while _alive(worker_pid):
            assert time.monotonic() < deadline, "the worker outlived its runner"
            time.sleep(0.05)
    finally:
        runner.kill()


RUNNER_SCRIPT = """
import sys, time
from repo2env.pipeline.executors import LocalExecutor
from test_executors import write_pid_then_sleep
if __name__ == "__main__":
    LocalExecutor(jobs=1).submit(write_pid_then_sleep, sys.argv[1])
    time.sleep(60)
"""


def write_pid_then_sleep(path):
    Path(path).write_text(str(os.getpid()))
    time.sleep(60)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_the_workers_get_repo2env_settings_and_the_proxies_in_effect_from_the_driver():
    from repo2env.pipeline.ray_executor import proxy_env_in_effect, worker_env_vars

    environ = {"REPO2ENV_IMAGE_NAMESPACE": "team-a", "HOME": "/root", "GITHUB_TOKEN": "secret"}
    assert worker_env_vars(environ) == {"REPO2ENV_IMAGE_NAMESPACE": "team-a"}
    assert proxy_env_in_effect({"HTTP_PROXY": "http://proxy:3128", "no_proxy": "localhost"}) == {
        "http_proxy": "http://proxy:3128", "HTTP_PROXY": "http://proxy:3128", "no_proxy": "localhost", "NO_PROXY": "localhost"}
    assert proxy_env_in_effect({"http_proxy": "", "HTTP_PROXY": "http://ignored:1"})["HTTP_PROXY"] == ""
    assert set(proxy_env_in_effect({}).values()) == {""}


def settings_seen():
    return {name: os.environ.get(name) or None for name in ("REPO2ENV_IMAGE_NAMESPACE", "http_proxy", "HTTP_PROXY")}


def test_a_task_sees_the_drivers_settings_and_proxies(make):
    executor = make()
    assert executor.submit(settings_seen).result(timeout=60) == settings_seen()


def test_a_ray_address_where_nothing_listens_is_refused_at_once():
    from repo2env.pipeline.ray_executor import check_cluster_answers

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        check_cluster_answers(f"127.0.0.1:{listening.getsockname()[1]}")
        closed = listening.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(InputError, match="no Ray cluster answers") as refused:
        check_cluster_answers(f"127.0.0.1:{closed}")
    assert time.monotonic() - started < 5 and "ray start --head" in refused.value.hint
    with pytest.raises(InputError, match="not a Ray address"):
        check_cluster_answers("head-node")
    check_cluster_answers("auto")  # Ray finds it (or says it cannot)


@pytest.mark.docker
def test_a_task_starts_a_sandbox_on_its_worker_and_returns_the_exec_result(make, docker_client):
    executor = make()
    result, worker_pid = executor.submit(echo_in_sandbox, BASE).result(timeout=120)
    assert isinstance(result, ExecResult)
    assert result.exit_code == 4 and result.output.strip() == "hello from agent in /testbed"
    assert worker_pid != os.getpid()  # it ran in a worker process, not here
