"""How this process's sandboxes end when it is stopped (a signal): nothing it started may stay."""

from __future__ import annotations

import threading
import time
import weakref

import pytest

from repo2env.errors import StoppingError
from repo2env.runtime.backends import lifecycle


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
