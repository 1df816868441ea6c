"""The keepalive every backend's sandbox runs as its main process, and what a command adds for it.

The container's main process, run by the image's system Python as root without capabilities (the
agent cannot kill it), ends the sandbox after ``limits.idle_timeout_s`` without a command running
and when what the sandbox wrote grows past ``limits.disk_bytes`` (an overlay writable layer on
ext4 cannot be capped, and copying into a tmpfs is not possible with every engine). Engine-neutral:
a backend starts it with :func:`keepalive_command` and reads its exit status.

What the writable places hold at the start is the image's: a task image records it at its build
(:data:`BASELINE_SCRIPT` into :data:`BASELINE_PATH`), so a sandbox does not walk them again as it
starts (a JavaScript task's node_modules: 33,000 files, about half a second of a core for each of
the dozen sandboxes that validate it). An image without the file is walked at the start, as before.
"""

from __future__ import annotations

from repo2env.runtime.channel import SERVER_MARKER

#: Every exec appends a byte to this file; the keepalive reads activity from its size and mtime.
HEARTBEAT_PATH = "/tmp/.repo2env-alive"
#: Seconds between two looks of the keepalive at activity and disk use.
KEEPALIVE_PERIOD_S = 5
#: The keepalive's exit status (the container's) when it stopped the sandbox for its disk use.
DISK_CAP_EXIT = 3
#: Where the agent (and the tests) can write: what the disk cap measures.
WRITABLE_PLACES = ("/testbed", "/home", "/tmp", "/var/tmp")
#: The bytes the writable places hold in the image, written (by root, last) when a task image is
#: built; the keepalive reads it as it starts, before any command runs.
BASELINE_PATH = "/opt/repo2env/writable-bytes"
#: The bytes in use under WRITABLE_PLACES (every inode once), as the keepalive and the image build count them.
USED_FUNCTION = f"""
def used():
    total, seen, stack = 0, set(), list({WRITABLE_PLACES!r})
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return total
"""
#: Prints what the writable places hold (run by the image's system Python as the task image's last step).
BASELINE_SCRIPT = "import os\n" + USED_FUNCTION + "print(used())\n"
# The container's main process, run by the image's system Python as root without capabilities (the
# agent cannot kill it). It never forks: a fork bomb that takes every pid must not end it (a shell's
# `sleep` would fail, and dash exits when it cannot fork). Every few seconds it looks for processes
# other than init, itself and a command channel's server waiting for work (a command, or anything
# one left running) and whether the heartbeat file each command appends to changed; while something
# runs it also adds up the blocks under WRITABLE_PLACES (what it may read: root without capabilities
# cannot enter another user's 0700 folder), against what they held at the start (BASELINE_PATH, or
# counted). It writes nothing: a file the agent made first cannot stop it.
KEEPALIVE_SCRIPT = f"""
import os, sys, time
idle_max, cap, beat, me = int(sys.argv[1]), int(sys.argv[2]), {HEARTBEAT_PATH!r}, str(os.getpid())
channel = {SERVER_MARKER.encode()!r}
def running():
    for name in os.listdir("/proc"):
        if not name.isdigit() or name in ("1", me):
            continue
        try:
            with open("/proc/" + name + "/cmdline", "rb") as handle:
                args = handle.read().split(b"\\0")
        except OSError:
            continue
        if channel not in args:  # the channel's server waiting for a command is not activity
            return True
    return False
{USED_FUNCTION.strip()}
def last_beat():
    try:
        info = os.stat(beat)
        return info.st_size, info.st_mtime_ns
    except OSError:
        return None
os.umask(0)
try:  # for every user to append to (a first exec may have been quicker: then it is that user's)
    os.close(os.open(beat, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
except OSError:
    pass
try:  # the image's own count (root's, from its build); else counted now
    with open({BASELINE_PATH!r}) as handle:
        start = int(handle.read())
except (OSError, ValueError):
    start = used()
limit, idle, seen_beat = start + cap, 0, last_beat()
while idle < idle_max:
    time.sleep({KEEPALIVE_PERIOD_S})
    busy = running()
    beat_now = last_beat()
    busy, seen_beat = busy or beat_now != seen_beat, beat_now
    idle = 0 if busy else idle + {KEEPALIVE_PERIOD_S}
    if busy and used() > limit:
        sys.exit({DISK_CAP_EXIT})
"""


def keepalive_command(idle_timeout_s: float, disk_bytes: int) -> list[str]:
    """The sandbox's main command: the keepalive under the image's system Python, isolated."""
    return ["/usr/bin/python3", "-I", "-S", "-c", KEEPALIVE_SCRIPT, str(int(idle_timeout_s)), str(int(disk_bytes))]


def timed_shell(command: str, timeout: float) -> list[str]:
    """The argv an engine exec runs for ``command``: ``timeout`` puts it in its own process group
    and signals the whole group (a fork bomb's children too; ``-k`` escalates to SIGKILL for ones
    that trap TERM), stderr joins stdout in one pipe (so the output keeps the order it was written
    in), and the heartbeat tells the keepalive a command ran (a short one between two of its looks)."""
    return ["timeout", "-k", "2", f"{timeout:.3f}", "/bin/sh", "-c",
            f"exec 2>&1; echo 2>/dev/null >>{HEARTBEAT_PATH}; {command}"]


def channel_shell(command: str) -> list[str]:
    """The argv the command channel's server runs for ``command`` (the same shell and heartbeat;
    the server does the process group and the timeout itself)."""
    return ["/bin/sh", "-c", f"echo 2>/dev/null >>{HEARTBEAT_PATH}; {command}"]
