"""Moved to :mod:`repo2env.runtime.backends.docker`; this name stays only so that branches written
against it still import while they are merged (remove it then). New code types against
:mod:`repo2env.runtime.sandbox` and builds the backend where it composes the program."""

from repo2env.runtime.backends.docker import (  # noqa: F401
    DISK_CAP_EXIT,
    HEARTBEAT_PATH,
    KEEPALIVE_PERIOD_S,
    KEEPALIVE_SCRIPT,
    SANDBOX_LABEL,
    WRITABLE_PLACES,
    DockerRuntime,
    DockerSandbox,
    connect_docker,
    stop_all_sandboxes,
    stopping,
)
