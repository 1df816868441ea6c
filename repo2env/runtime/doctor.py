"""``repo2env doctor``: is this machine ready to build and run environments?"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from repo2env.errors import DockerUnavailableError
from repo2env.runtime.backends.docker import connect_docker
from repo2env.runtime.bootstrap import base_image_tag, find_base_image, local_base_pythons, makeable_pythons
from repo2env.runtime.ownership import reap_orphans
from repo2env.runtime.package_access import PackageAccess


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class DoctorReport:
    """Every check; ``ready`` when the engine answers and the default base image exists."""

    checks: list[Check] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        required = {"docker engine", f"base image {base_image_tag('3.11')}"}
        return all(check.ok for check in self.checks if check.name in required)

    def as_dict(self) -> dict:
        """Machine-readable form (``--json``)."""
        return {"ready": self.ready, "checks": [check.__dict__ for check in self.checks]}


def diagnose(output_dir: Path = Path("generated")) -> DoctorReport:
    """Run every check; never raises for a missing piece (that is what it reports)."""
    checks: list[Check] = []
    try:
        client = connect_docker(timeout=5)
        version = client.version()
        checks.append(Check("docker engine", True, f"Docker {version.get('Version')} ({version.get('Os')}/{version.get('Arch')})"))
    except DockerUnavailableError as exc:
        client = None
        checks.append(Check("docker engine", False, exc.message, fix=exc.hint or ""))
    if client is not None:
        # Sandboxes of a killed repo2env hold CPU, memory and (grading ones) the hidden tests.
        reaped = reap_orphans(client)
        checks.append(Check("orphaned sandboxes", True,
                            f"removed {len(reaped)} left by dead repo2env processes: {', '.join(reaped)}" if reaped
                            else "none (every sandbox's owner is alive)"))
    # Every Python a base image exists for or can be made for without a registry, and how.
    ways = makeable_pythons()
    present = set(local_base_pythons(client)) if client is not None else set()
    for python in sorted(set(ways) | present, key=lambda version: tuple(int(part) for part in version.split("."))):
        name = f"base image {base_image_tag(python)}"
        required = python == "3.11"
        how = ways.get(python, "a registry's python:" + python + "-slim")
        if client is None:
            checks.append(Check(name, False, "unknown: no engine", fix="start the engine first"))
            continue
        image = find_base_image(client, python) if python in present or required else None
        if image:
            source = _python_source(client, image.tag)
            checks.append(Check(name, True, f"present ({image.image_id[7:19]}{'; made from ' + source if source else ''})"))
        else:
            checks.append(Check(
                name, not required,
                f"missing; can be made from {how}" + ("" if required else " (built when a task needs Python " + python + ")"),
                fix=f"repo2env runtime bootstrap --python {python}",
            ))
    access = PackageAccess.from_environment()
    described = access.describe()
    checks.append(Check("CA bundle for builds", True, described["ca_bundle"],
                        fix="set REPO2ENV_CA_BUNDLE=/path/to/bundle.pem behind a TLS-intercepting proxy"))
    checks.append(Check("package index for builds", True, described["index_url"] +
                        (f"; extra: {described['extra_index_url']}" if access.extra_index_url else ""),
                        fix="set REPO2ENV_INDEX_URL (or PIP_INDEX_URL) to use a mirror"))
    debootstrap = shutil.which("debootstrap")
    checks.append(Check("debootstrap", debootstrap is not None, debootstrap or "not installed",
                        fix="apt-get install debootstrap (needed only when no registry serves python:X.Y-slim)"))
    target = output_dir if output_dir.exists() else Path.cwd()
    free_gb = shutil.disk_usage(target).free / 2**30
    checks.append(Check("free disk", free_gb >= 5, f"{free_gb:.1f} GiB free at {target.resolve()}",
                        fix="free some space: 'repo2env images gc' (when built) or 'docker system prune'"))
    return DoctorReport(checks)


def _python_source(client, tag: str) -> str:
    """The local CPython a base image was made from (its label), or ''."""
    try:
        return (client.images.get(tag).labels or {}).get("repo2env.python_source", "")
    except Exception:  # noqa: BLE001 - a report line, never a failure
        return ""
