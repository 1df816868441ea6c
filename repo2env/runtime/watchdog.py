"""Runs a command inside an image and stops it when nothing progresses (standard library only; run
by the image's system Python: ``/usr/bin/python3 -I -S watchdog.py``). See ``build.py``.

``watchdog.py --idle SECONDS [--timeout SECONDS] -- COMMAND...`` runs COMMAND in a session of its
own, its output (stdout and stderr together) passed through. Progress is new output, network bytes
(this network namespace's interfaces), or CPU time of the session's processes (since the last
progress, a sixtieth of the idle time, at most ``MIN_CPU_S`` and at least ``MIN_CPU_FLOOR_S``: a
retry loop that sleeps between failed connections makes none). After ``--idle`` seconds without any, or past ``--timeout``, every process of the session is
killed and the last line says why and what it was waiting on::

    repo2env-watchdog: stalled after 60 s without output, CPU or network progress; waiting on files.example.org:443 (203.0.113.7, connecting)

The hosts come from the command's own sockets (``/proc``) and, for Python processes, from a
``sitecustomize`` placed first on ``PYTHONPATH`` that records each name lookup and what it resolved
to (then hands over to any ``sitecustomize`` of the environment). Exit status: the command's; 124
after ``--timeout``; 125 after a stall.
"""

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

MARKER = "repo2env-watchdog: "
STALLED, TIMED_OUT = 125, 124
MIN_CPU_S = 1.0
MIN_CPU_FLOOR_S = 0.05
MIN_NETWORK_BYTES = 4096
_TCP_STATES = {"01": "connected, nothing arriving", "02": "connecting", "08": "closing"}

_SITECUSTOMIZE = '''\
import os as _os
import socket as _socket
import sys as _sys


def _record(line):
    try:
        handle = _os.open(_os.environ["REPO2ENV_HOSTS_LOG"], _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT, 0o600)
        _os.write(handle, (line + "\\n").encode("utf-8", "replace"))
        _os.close(handle)
    except Exception:
        pass


_real_getaddrinfo = _socket.getaddrinfo


def _getaddrinfo(host, port, *args, **kwargs):
    _record("lookup %s %s" % (host, port))
    result = _real_getaddrinfo(host, port, *args, **kwargs)
    _record("resolved %s %s %s" % (host, port, " ".join(sorted({str(entry[4][0]) for entry in result}))))
    return result


_socket.getaddrinfo = _getaddrinfo
# The environment's own sitecustomize, if it has one, runs as it would have.
_here = _os.path.dirname(_os.path.abspath(__file__))
try:
    import importlib.machinery as _machinery
    import importlib.util as _util

    _spec = _machinery.PathFinder.find_spec(
        "sitecustomize", [entry for entry in _sys.path if _os.path.abspath(entry or ".") != _here])
    if _spec is not None and _spec.loader is not None:
        _spec.loader.exec_module(_util.module_from_spec(_spec))
except Exception:
    pass
'''


def _session_processes(session):
    """(pid, CPU seconds) of every live process of ``session``."""
    found = []
    ticks = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session:
            found.append((int(name), sum(int(value) for value in fields[11:15]) / ticks))
    return found


def _network_bytes():
    total = 0
    try:
        with open("/proc/self/net/dev") as handle:
            for line in handle.readlines()[2:]:
                interface, _, counters = line.partition(":")
                if interface.strip() != "lo":
                    values = counters.split()
                    total += int(values[0]) + int(values[8])
    except (OSError, ValueError, IndexError):
        pass
    return total


def _address(text, family):
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    if family == socket.AF_INET:
        address = socket.inet_ntop(family, raw[::-1])
    else:
        address = socket.inet_ntop(family, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    return address, int(port, 16)


def _waiting_on(pids, hosts_log):
    """What the processes' sockets wait on, as ``host:port (address, state)``, named by the lookups
    the hosts log recorded; lookups that never resolved are named too."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    names, pending = {}, []
    try:
        with open(hosts_log, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                words = line.split()
                if len(words) >= 3 and words[0] == "lookup":
                    pending.append(f"{words[1]}:{words[2]}")
                elif len(words) >= 3 and words[0] == "resolved":
                    endpoint = f"{words[1]}:{words[2]}"
                    if endpoint in pending:
                        pending.remove(endpoint)
                    for address in words[3:]:
                        names[address] = words[1]
    except OSError:
        pass
    waits = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6), ("udp", socket.AF_INET),
                          ("udp6", socket.AF_INET6)):
        try:
            with open("/proc/self/net/" + table) as handle:
                rows = [line.split() for line in handle.readlines()[1:]]
        except OSError:
            continue
        for row in rows:
            if len(row) < 10 or row[9] not in inodes:
                continue
            address, port = _address(row[2], family)
            if port == 0:
                continue
            state = "DNS lookup" if table.startswith("udp") and port == 53 else _TCP_STATES.get(row[3], "open")
            name = names.get(address)
            waits.append(f"{name}:{port} ({address}, {state})" if name else f"{address}:{port} ({state})")
    waits.extend(f"{endpoint} (name lookup unanswered)" for endpoint in dict.fromkeys(pending))
    return list(dict.fromkeys(waits))


def _stop(session):
    for _ in range(3):
        for pid, _ in _session_processes(session):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)


def main(argv):
    idle, timeout, command = 60.0, None, []
    words = list(argv)
    while words:
        word = words.pop(0)
        if word == "--":
            command = words
            break
        if word == "--idle":
            idle = float(words.pop(0))
        elif word == "--timeout":
            timeout = float(words.pop(0))
        else:
            print("usage: watchdog.py --idle SECONDS [--timeout SECONDS] -- COMMAND...", file=sys.stderr)
            return 2
    if not command:
        print("usage: watchdog.py --idle SECONDS [--timeout SECONDS] -- COMMAND...", file=sys.stderr)
        return 2
    hook_dir = tempfile.mkdtemp(prefix="repo2env-watchdog-")
    try:
        return _watch(command, idle, timeout, hook_dir)
    finally:  # nothing of the watchdog stays in the image it ran in
        shutil.rmtree(hook_dir, ignore_errors=True)


def _watch(command, idle, timeout, hook_dir):
    """Run ``command`` under the watch (its hooks in ``hook_dir``); its status, or the watchdog's."""
    with open(os.path.join(hook_dir, "sitecustomize.py"), "w") as handle:
        handle.write(_SITECUSTOMIZE)
    hosts_log = os.path.join(hook_dir, "hosts.log")
    env = dict(os.environ, REPO2ENV_HOSTS_LOG=hosts_log,
               PYTHONPATH=os.pathsep.join(part for part in (hook_dir, os.environ.get("PYTHONPATH", "")) if part))
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, env=env)
    session = child.pid
    output = child.stdout.fileno()
    started = last_progress = time.monotonic()
    cpu_mark, network_mark = 0.0, _network_bytes()
    min_cpu = max(MIN_CPU_FLOOR_S, min(MIN_CPU_S, idle / 60))
    why = None
    while True:
        readable, _, _ = select.select([output], [], [], 1.0)
        now = time.monotonic()
        if readable:
            data = os.read(output, 65536)
            if not data:
                break
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            last_progress = now
        processes = _session_processes(session)
        cpu, network = sum(seconds for _, seconds in processes), _network_bytes()
        if cpu - cpu_mark >= min_cpu or network - network_mark >= MIN_NETWORK_BYTES:
            last_progress = now
        if last_progress == now:
            cpu_mark, network_mark = cpu, network
        if timeout is not None and now - started > timeout:
            why = (TIMED_OUT, f"timed out after {timeout:.0f} s")
        elif now - last_progress >= idle:
            why = (STALLED, f"stalled after {idle:.0f} s without output, CPU or network progress")
        if why is not None:
            waits = _waiting_on([pid for pid, _ in processes], hosts_log)
            _stop(session)
            child.wait()
            sys.stdout.write(f"\n{MARKER}{why[1]}{'; waiting on ' + ', '.join(waits) if waits else ''}\n")
            sys.stdout.flush()
            return why[0]
    status = child.wait()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
