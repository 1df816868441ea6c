"""``repo2env doctor``: is this machine ready to build and run environments?"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from repo2env.errors import BackendUnavailableError
from repo2env.runtime.backend import BackendSettings
from repo2env.runtime.backends import BACKENDS, backend_name, open_backend, preflight
from repo2env.runtime.bootstrap import base_image_tag, find_base_image, local_base_pythons, makeable_pythons
from repo2env.runtime.local_pythons import version_key
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
    """Every check; ``ready`` when the selected backend runs and its default base image exists."""

    checks: list[Check] = field(default_factory=list)
    backend: str = "docker"
    """The backend the checks of images are about (``--backend`` / ``REPO2ENV_BACKEND``)."""

    @property
    def ready(self) -> bool:
        required = {f"backend {self.backend}", f"base image {base_image_tag('3.11')}"}
        return all(check.ok for check in self.checks if check.name in required)

    def as_dict(self) -> dict:
        """Machine-readable form (``--json``)."""
        return {"ready": self.ready, "backend": self.backend, "checks": [check.__dict__ for check in self.checks]}


def diagnose(output_dir: Path = Path("generated"), *, backend: str | None = None) -> DoctorReport:
    """Run every check (one line per registered backend; images on the selected one); never raises
    for a missing piece (that is what it reports)."""
    selected = backend_name(backend)
    settings = BackendSettings.from_environment()
    checks: list[Check] = []
    opened = None
    for name in BACKENDS:
        line = preflight(name, settings)
        # Only the selected backend must run here; another one's line says whether it could.
        role = "selected" if name == selected else f"not selected; --backend {name} uses it"
        checks.append(Check(f"backend {name}", line.ok, f"{line.detail} ({role})", fix=line.fix))
        if not line.ok:
            continue
        try:
            running = open_backend(name, settings)
        except BackendUnavailableError:
            continue
        if name == selected:
            opened = running
        # Sandboxes of a killed repo2env hold CPU, memory and (grading ones) the hidden tests.
        reaped = reap_orphans(running)
        checks.append(Check(f"orphaned sandboxes ({name})", True,
                            f"removed {len(reaped)} left by dead repo2env processes: {', '.join(reaped)}" if reaped
                            else "none (every sandbox's owner is alive)"))
    # Every Python a base image exists for or can be made for without a registry, and how.
    ways = makeable_pythons()
    present = set(local_base_pythons(opened)) if opened is not None else set()
    for python in sorted(set(ways) | present, key=version_key):
        name = f"base image {base_image_tag(python)}"
        required = python == "3.11"
        if opened is None:
            checks.append(Check(name, False, f"unknown: the {selected} backend does not run here",
                                fix="make the selected backend run first (see its line)"))
            continue
        image = find_base_image(opened, python) if python in present or required else None
        if image:
            info = opened.images.get(image.tag)
            source = (info.labels or {}).get("repo2env.python_source", "") if info is not None else ""
            checks.append(Check(name, True, f"present ({image.image_id[7:19]}{'; made from ' + source if source else ''})"))
        else:
            how = ways.get(python, f"a registry's python:{python}-slim")
            checks.append(Check(
                name, not required,
                f"missing; can be made from {how}" + ("" if required else f" (built when a task needs Python {python})"),
                fix=f"repo2env --backend {selected} runtime bootstrap --python {python}",
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
    return DoctorReport(checks, backend=selected)
