"""How this process's sandboxes end when it is stopped (a signal): nothing it started may stay."""

from __future__ import annotations

import threading
import time
import weakref
from types import SimpleNamespace

import pytest

from repo2env.errors import StoppingError
from repo2env.runtime.backends import container, lifecycle
from repo2env.runtime.sandbox import SandboxLimits


class _Sandbox:
    """A sandbox's lifecycle as ContainerSandbox has it: close() is idempotent, and close(wait=False)
    hands the (slow) removal to the background."""

    def __init__(self, on_close=None) -> None:
        self.closed = False
        self.removed = threading.Event()
        self.on_close = on_close
        lifecycle.register(self)

    def close(self, *, wait: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        if wait:
            self._remove()
        else:
            lifecycle.remove_later(self._remove)
        if self.on_close:
            self.on_close()

    def remove_now(self) -> None:
        self.closed = True
        self._remove()

    def _remove(self) -> None:
        time.sleep(0.5)
        self.removed.set()
        lifecycle.forget(self)


@pytest.fixture
def fresh_lifecycle(monkeypatch):
    """The module's process-wide state, fresh for this test (and left as it was for the others)."""
    monkeypatch.setattr(lifecycle, "_stopping", threading.Event())
    monkeypatch.setattr(lifecycle, "_open_sandboxes", weakref.WeakSet())
    monkeypatch.setattr(lifecycle, "_pending_removals", [])


def test_a_stop_waits_for_removals_handed_to_the_background_while_it_closed_the_rest(fresh_lifecycle):
    """While the stop closes the open sandboxes, another thread's grading ends and closes its
    sandbox without waiting: the stop returns only once that removal is done too (the process
    exits right after, which would kill the removal half-way)."""
    late: list[_Sandbox] = []

    def another_grading_ends() -> None:
        sandbox = _Sandbox()
        sandbox.close(wait=False)
        late.append(sandbox)

    first = _Sandbox(on_close=another_grading_ends)
    assert lifecycle.stop_all_sandboxes(wait_s=5) == 1
    assert first.removed.is_set()
    [sandbox] = late
    assert sandbox.removed.is_set(), "a removal handed to the background during the stop was not waited for"


def test_a_stop_refuses_new_starts_and_waits_for_those_under_way(fresh_lifecycle):
    entered, release = threading.Event(), threading.Event()
    created: list[_Sandbox] = []

    def start() -> None:
        with lifecycle.starting():
            entered.set()
            release.wait(5)
            created.append(_Sandbox())

    thread = threading.Thread(target=start)
    thread.start()
    entered.wait(5)
    threading.Timer(0.3, release.set).start()
    assert lifecycle.stop_all_sandboxes(wait_s=5) == 1
    thread.join(5)
    assert created and created[0].removed.is_set(), "a start under way at the stop left its sandbox"
    with pytest.raises(StoppingError):
        with lifecycle.starting():
            pass


class _Refused(container.ContainerSandbox):
    """A container whose engine refuses its first removal (a loaded Docker: "tried to kill
    container, but did not receive an exit event") and removes it when asked again."""

    def __init__(self) -> None:
        super().__init__("c0ffee", SandboxLimits())
        self.removals = 0

    def _destroy(self) -> None:
        self.removals += 1
        if self.removals == 1:
            raise RuntimeError("tried to kill container, but did not receive an exit event")


def test_a_stop_removes_again_what_a_background_removal_left(fresh_lifecycle):
    """A grading closed its sandbox without waiting and the engine refused that removal: the stop
    removes it again before it returns (the process exits right after: nothing else would)."""
    sandbox = _Refused()
    sandbox.close(wait=False)
    lifecycle.wait_for_removals(time.monotonic() + 5)
    assert sandbox.removals == 1 and sandbox in lifecycle._open_sandboxes, "the refused removal left it open"
    lifecycle.stop_all_sandboxes(wait_s=5)
    assert sandbox.removals == 2 and sandbox not in lifecycle._open_sandboxes


class _Unstartable(container.ContainerSandbox):
    """A container whose runtime cannot start a command the first ``refusals`` times (no pid left
    while a killed fork bomb's processes are reaped), on a clock the test moves."""

    def __init__(self, refusals: int, clock: dict) -> None:
        super().__init__("c0ffee", SandboxLimits())
        self.refusals, self.clock, self.tries = refusals, clock, 0

    def _run(self, argv, *, user, workdir, env, stdin, deadline, idle_s=None) -> container.Ran:
        self.tries += 1
        if self.tries <= self.refusals:
            return container.Ran(exit_code=126, output=b"Error: OCI runtime error: runc: exec failed", truncated=False,
                                 not_started=True)
        return container.Ran(exit_code=0, output=b"still-here\n", truncated=False)


@pytest.mark.parametrize(("refusals", "started"), [(6, True), (40, False)])
def test_a_command_the_runtime_cannot_start_is_tried_again_for_seconds(monkeypatch, refusals, started):
    """A loaded CI run reaped a killed fork bomb's processes more slowly than four tries 0.5-1.5 s
    apart covered: the next command failed to start. It is tried again for START_RETRY_S; past
    that, the caller gets exit 126 with the runtime's words."""
    clock = {"now": 0.0}
    fake_time = SimpleNamespace(monotonic=lambda: clock["now"],
                                sleep=lambda seconds: clock.__setitem__("now", clock["now"] + seconds))
    monkeypatch.setattr(container, "time", fake_time)
    sandbox = _Unstartable(refusals, clock)
    result = sandbox._exec("echo still-here", timeout=30, errors="strict", through_channel=False)
    if started:
        assert (result.exit_code, result.output, sandbox.tries) == (0, "still-here\n", 7)
        assert clock["now"] > 6, "six refusals span seconds of retries"
    else:
        assert result.exit_code == 126 and "exec failed" in result.output
        assert container.START_RETRY_S - 2 <= clock["now"] <= container.START_RETRY_S
    lifecycle.forget(sandbox)
