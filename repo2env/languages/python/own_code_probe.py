"""Runs inside env and task images (standard library only, Python 3.6+); see ``own_code.py``.

``python own_code_probe.py check JSON``: every import name of the project resolves to a file under
``/testbed``, its installed distribution is the editable install of ``/testbed``, and its console
scripts run that code. Prints one ``own-code check failed: ...`` line per problem, exits 1 if any.

``python own_code_probe.py generated [DISTRIBUTION]``: the files under ``/testbed`` that git does
not track (ignored ones included) and the install left there, one path a line; caches, build
leftovers and an ``.egg-info`` that is not the installed metadata left out. ``leftovers`` lists
those left out (top folders), which the task layer deletes.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

TESTBED = "/testbed"
MARKER = "own-code check failed: "
# Left by builds, never needed at run time (unless the metadata lives there, see below).
SKIPPED_DIRS = ("build", "dist", ".eggs", "pip-wheel-metadata", ".tox", ".nox", ".pytest_cache")


def _under_testbed(path):
    return bool(path) and os.path.realpath(path).startswith(TESTBED + "/")


def _locations(spec):
    if spec.origin and spec.origin not in ("namespace", "built-in", "frozen"):
        return [spec.origin]
    return list(spec.submodule_search_locations or [])


def _find(name):
    """(spec or None, error text or None) without importing the package itself."""
    try:
        return importlib.util.find_spec(name), None
    except (ImportError, ValueError) as exc:  # a finder that fails, a broken .pth hook
        return None, f"{type(exc).__name__}: {exc}"


def _distribution(name):
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8: the backport where installed, else setuptools' pkg_resources
        try:
            import importlib_metadata as metadata
        except ImportError:
            return _LegacyDistribution.find(name)
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


class _EntryPoint:
    def __init__(self, group, name, value):
        self.group, self.name, self.value = group, name, value


class _LegacyDistribution:
    """pkg_resources' view of an installed distribution, with the few ``importlib.metadata`` members
    this probe reads (Python 3.6 and 3.7 have no ``importlib.metadata``)."""

    def __init__(self, dist):
        self._dist = dist
        self.version = dist.version
        # An egg-link (setup.py develop) points at the source tree, where the .egg-info sits.
        self._path = getattr(dist, "egg_info", None) or dist.location

    @classmethod
    def find(cls, name):
        try:
            import pkg_resources
        except ImportError:
            return None
        try:
            return cls(pkg_resources.get_distribution(name))
        except Exception:  # DistributionNotFound, VersionConflict: not what the check asks for
            return None

    def read_text(self, filename):
        if not self._dist.has_metadata(filename):
            return None
        return self._dist.get_metadata(filename)

    def locate_file(self, path):
        return os.path.join(self._dist.location or "", path)

    @property
    def entry_points(self):
        return [_EntryPoint(group, name, str(entry).split("=", 1)[1].strip())
                for group, entries in self._dist.get_entry_map().items() for name, entry in entries.items()]


def _installed_from(dist):
    """Where an installed distribution came from: 'editable /testbed', a URL, or 'an index'."""
    try:
        text = dist.read_text("direct_url.json")
    except OSError:
        text = None
    if text:
        try:
            info = json.loads(text)
        except ValueError:
            info = {}
        url = info.get("url", "")
        editable = bool(info.get("dir_info", {}).get("editable"))
        if editable and url.rstrip("/") in ("file://" + TESTBED, "file:" + TESTBED):
            return "editable /testbed"
        return url or "an index"
    # Legacy `setup.py develop`: the metadata itself sits in the source tree.
    if _under_testbed(str(dist.locate_file(""))) or _under_testbed(str(getattr(dist, "_path", ""))):
        return "editable /testbed"
    return "an index"


def check(arguments):
    names = arguments.get("import_names") or []
    distribution = arguments.get("distribution")
    editable = bool(arguments.get("editable"))
    declared = bool(arguments.get("declared"))
    problems = []
    resolved = 0
    for name in names:
        spec, error = _find(name)
        if spec is None:
            if editable and (declared or error):
                problems.append(f"{name} is not importable" + (f" ({error})" if error else ""))
            continue
        locations = _locations(spec)
        if not any(_under_testbed(location) for location in locations):
            where = locations[0] if locations else "nowhere"
            problems.append(f"{name} imports from {where}, not /testbed")
        else:
            resolved += 1
    if editable and names and not resolved and not problems:
        problems.append(f"none of {', '.join(names)} imports from /testbed")
    if editable and distribution:
        dist = _distribution(distribution)
        if dist is None:
            problems.append(f"the distribution {distribution} is not installed")
        else:
            origin = _installed_from(dist)
            if origin != "editable /testbed":
                problems.append(f"the installed {distribution} {dist.version} comes from {origin}, not the editable install of /testbed")
            for entry in dist.entry_points:
                if entry.group not in ("console_scripts", "gui_scripts"):
                    continue
                top = entry.value.split(":")[0].strip().split(".")[0]
                spec, _ = _find(top)
                where = _locations(spec) if spec else []
                if not any(_under_testbed(location) for location in where):
                    origin = where[0] if where else "nowhere"
                    problems.append(f"the console script {entry.name} runs {top} from {origin}, not /testbed")
    for problem in problems:
        print(MARKER + problem)
    return 1 if problems else 0


def _untracked(distribution):
    """(generated, leftovers): what the install created in /testbed that git does not track, split
    into what the project needs at run time and what builds leave behind (caches, ``build/``, an
    ``.egg-info`` that is not the installed metadata; the top folder of each)."""
    # The task layer runs this as root on files the agent owns: git's ownership check needs a
    # safe.directory from a global config (older gits ignore one given with -c).
    home = tempfile.mkdtemp()
    with open(os.path.join(home, ".gitconfig"), "w") as config:
        config.write("[safe]\n\tdirectory = *\n")
    listing = subprocess.run(
        ["git", "-c", "core.quotePath=false", "-C", TESTBED, "status", "--porcelain", "-z", "--ignored",
         "--untracked-files=all"],
        stdout=subprocess.PIPE, check=True, env=dict(os.environ, HOME=home)).stdout.decode("utf-8", "replace")
    shutil.rmtree(home, ignore_errors=True)
    metadata_dir = None
    dist = _distribution(distribution) if distribution else None
    if dist is not None:
        path = os.path.realpath(str(getattr(dist, "_path", "")))
        if path.startswith(TESTBED + "/"):
            metadata_dir = os.path.relpath(path, TESTBED)
    generated, leftovers = [], set()
    for entry in listing.split("\0"):
        if not entry.startswith(("?? ", "!! ")):
            continue
        path = entry[3:].rstrip("/")
        parts = path.split("/")
        leftover = None
        if parts[0] in SKIPPED_DIRS:
            leftover = parts[0]
        elif "__pycache__" in parts:
            leftover = "/".join(parts[: parts.index("__pycache__") + 1])
        elif path.endswith((".pyc", ".pyo")):
            leftover = path
        else:
            for index, part in enumerate(parts):
                if part.endswith((".egg-info", ".dist-info")):
                    top = "/".join(parts[: index + 1])
                    if top != metadata_dir:
                        leftover = top
                    break
        if leftover is None:
            generated.append(path)
        else:
            leftovers.add(leftover)
    return sorted(generated), sorted(leftovers)


def generated(distribution):
    for path in _untracked(distribution)[0]:
        print(path)
    return 0


def leftovers(distribution):
    for path in _untracked(distribution)[1]:
        print(path)
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "check":
        return check(json.loads(argv[1]))
    if argv and argv[0] in ("generated", "leftovers"):
        command = generated if argv[0] == "generated" else leftovers
        return command(argv[1] if len(argv) > 1 and argv[1] else None)
    print("usage: own_code_probe.py check JSON | generated [DISTRIBUTION] | leftovers [DISTRIBUTION]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
