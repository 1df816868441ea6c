"""The ``repo2env`` command line: parse, call the library, print. Nothing else lives here.

One module per command group registers its commands on the root group (:mod:`repo2env.cli.root`);
:func:`main` is the console entry point (``repo2env = "repo2env.cli:main"``).
"""

from __future__ import annotations

import errno
import os
import signal
import sys

import click

# The command groups, imported for their registration on the root group (in the order --help lists
# the commands that the root group's order does not rank).
from repo2env.cli import build, demo, grade, harness, mine, pipeline, publish, runtime, serve, train, validate  # noqa: F401
from repo2env.cli.root import cli
from repo2env.errors import Repo2EnvError

__all__ = ["cli", "main"]


def main() -> None:
    """Console entry point: user errors become one line on stderr and a non-zero exit."""
    # SIGTERM (a killed job, a CI timeout) unwinds like Ctrl-C.
    received = {"signal": signal.SIGINT}

    def on_term(signum: int, frame: object) -> None:
        received["signal"] = signal.SIGTERM
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        exit_code = cli.main(standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        _stop_after_interrupt(128 + received["signal"])
    except click.UsageError as exc:
        # One line, like every other user error; the command's help is one flag away.
        click.echo(f"error: {exc.format_message()}", err=True)
        if exc.ctx is not None:
            click.echo(f"hint: see '{exc.ctx.command_path} --help'", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Repo2EnvError as exc:
        # Plain echo, not rich: an error must stay one line whatever the terminal's width.
        click.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno not in _USER_OS_ERRORS:
            raise
        # A read-only or full output folder, a path that is a file: the user's to fix, not a bug.
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"error: {where}{exc.strerror or exc}", err=True)
        click.echo("hint: check that the folder exists, is writable and has free space", err=True)
        sys.exit(1)
    sys.exit(exit_code if isinstance(exit_code, int) else 0)


def _stop_after_interrupt(exit_code: int) -> None:
    """Remove every sandbox still running (other threads' too: build and validate run tasks in a
    pool), say so in one line and exit at once. Queued tasks were cancelled on the way out; what
    finished is already in tasks.jsonl / validation.jsonl (written whole, after each task).

    The exit does not wait for threads still working: a task whose sandbox was removed fails
    quickly, but an image build under way would hold the exit for minutes; the engine abandons
    that build (and removes its step container) when this process's connection closes."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the clean-up short
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    removed = 0
    lifecycle = sys.modules.get("repo2env.runtime.backends.lifecycle")
    if lifecycle is not None:
        try:
            removed = lifecycle.stop_all_sandboxes()
        except Exception:  # noqa: BLE001 - the engine may be what went away; exit all the same
            pass
    click.echo(f"interrupted{f': removed {removed} running sandbox(es)' if removed else ''}; "
               "finished work is saved, re-run to resume", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)


#: OS errors that a user's folder or disk causes (and fixes).
_USER_OS_ERRORS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG,
                             errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG})
