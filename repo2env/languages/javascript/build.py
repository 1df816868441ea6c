"""The JavaScript profile's build recipe: ``node_modules`` installed as the lock file (or npm's
``--before``) pins it, on a Node base image, checked by running the PR's test files with the
project's runner.

The env layer installs in ``/testbed`` with the package manager the repository uses, then removes
every file that is not inside a ``node_modules`` folder (or Yarn's Plug'n'Play state): the tracked
files come back with the task layer's snapshot, and what an install script built from the sources
(a ``prepare: tsc`` output) would be the env commit's code, not the task's. The task layer copies
the snapshot over it, owned by the agent, and tells git to ignore ``node_modules`` so it never shows
up in the agent's diff. The pin used is recorded in ``EnvSpec.dependency_pin``. What the PR adds to
package.json (``EnvSpec.added_dependencies``) is installed after the base commit's dependencies,
package.json and the lock file left alone: the gold patch needs it, and the sandbox has no network.
An image that passes its check records the names each hidden test file declares tests with, read
from the file as a grading restores it (``EnvSpec.test_callees``: the grader's canaries use them).

The building blocks are the profile's pure modules: :mod:`.environment` (package manager, Node,
install commands, pin, ladder, failure classes, workspaces) and :mod:`.runners` (the runner, its
invocation, the command that runs test files, its reports).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from repo2env.errors import InputError, PatchError
from repo2env.languages.build import (
    COLLECTION_TIMEOUT,
    OWN_CODE_MARKER,
    STALL_IDLE_S,
    TOOLS_DIR,
    BuildRecipe,
    EnvLayer,
    Shell,
    ShellFiles,
    TaskLayer,
    plain_log,
)
from repo2env.languages.files import RepoFiles
from repo2env.languages.javascript.added_dependencies import dependencies_added
from repo2env.languages.javascript.data_tests import data_files, tests_reading_data
from repo2env.languages.javascript.environment import (
    AVAILABLE_NODES,
    INSTALL_ENV,
    DatePin,
    JsEnvironment,
    added_dependencies_install,
    infer_environment,
    install_failure_reason,
    install_ladder,
    node_range_allows,
    package_manager,
    packages_touched,
    workspace_packages,
)
from repo2env.languages.javascript.imports import imported_packages
from repo2env.languages.javascript.paths import is_test_file, javascript_paths, runner_test_patterns
from repo2env.languages.javascript.project import ProjectFiles
from repo2env.languages.javascript.runner import spec_invocation
from repo2env.languages.javascript.runners import (
    IMPORTED_TEST_API,
    browser_only_reason,
    cache_warmup_command,
    detect_runner,
    plan_run,
    reported_outcomes,
    reporter_sources,
    script_invocation,
)
from repo2env.languages.javascript.syntax import code_suffix
from repo2env.languages.javascript.test_callees import file_callees
from repo2env.languages.javascript.test_ids import split_test_id
from repo2env.models import EnvSpec, Task
from repo2env.patches import apply_to_text, parse

#: The system Python of each Node base image (``runtime.node_bootstrap.DEBIAN_NODE``: Debian's
#: nodejs of bullseye, bookworm, trixie); a local Node prefix is copied onto the 3.11 base.
NODE_BASE_PYTHONS = {"12": "3.9", "18": "3.11", "20": "3.13"}
LOCAL_NODE_PYTHON = "3.11"
PROBE = f"{TOOLS_DIR}/own_code_probe.js"
_HERE = Path(__file__).parent
_NODE_FLAVOUR = re.compile(r"node(\d+)")
#: What git must ignore in the task's work tree: what the install left there.
GENERATED = ("node_modules/", ".pnp.cjs", ".pnp.loader.mjs", ".pnp.data.json", ".yarn/install-state.gz",
             ".yarn/unplugged/", ".yarn/build-state.yml")
_DEPENDENCY_FILE = re.compile(
    r"(?:^|/)(?:package\.json|package-lock\.json|npm-shrinkwrap\.json|yarn\.lock|pnpm-lock\.yaml"
    r"|pnpm-workspace\.yaml|\.npmrc|\.yarnrc|\.yarnrc\.yml|\.pnpmfile\.cjs|\.nvmrc|\.node-version)$"
    r"|^(?:\.yarn/(?:releases|patches|plugins)/|patches/)")
#: Where the image check writes the runner's reports.
_REPORTS = "/tmp/repo2env-check"


@dataclass(frozen=True)
class JsOwnCode:
    """The names of the project's own packages (the root's and every workspace package's)."""

    names: tuple[str, ...]


def available_nodes(bases: Sequence[str] | None) -> tuple[str, ...]:
    """The Node majors a build may choose: those of the ``node<N>`` base-image flavours in ``bases``
    (the engine's Node bases: no machine has them all, unlike the Python ones ``make base-image``
    makes), else the ones Debian gives every machine (``repo2env runtime bootstrap --node N``). The
    inferred reason says when a Node without a base image would fit better."""
    local = {match.group(1) for flavour in bases or () if (match := _NODE_FLAVOUR.fullmatch(flavour))}
    return tuple(sorted(local or set(AVAILABLE_NODES), key=int))


class JavaScriptBuild(BuildRecipe):
    """The JavaScript build recipe (module docstring)."""

    def infer_env_spec(self, files: RepoFiles, commit_date: datetime, override=None,
                       bases: Sequence[str] | None = None, *, touched: Sequence[str] = (),
                       patches: Sequence[str] = ()) -> EnvSpec:
        """Node, package manager, pin and install from the files (:func:`.environment.infer_environment`);
        the workspace package the change touches, and its test runner; the packages the PR's
        ``patches`` add to the dependencies (:func:`.added_dependencies.dependencies_added`). An
        override may replace the install, add commands around it and Debian packages, set the test
        command, and set or drop (``false``) the ``--before`` date; a Python it names does not apply."""
        project = ProjectFiles.of(files)
        environment = infer_environment(project, commit_date, available_nodes(bases))
        package_dir = _package_dir(project, touched)
        evidence = detect_runner(project, package_dir) or (detect_runner(project) if package_dir else None)
        if evidence is None:
            where = f"the package in {package_dir}/" if package_dir else "the repository"
            raise InputError(f"no test runner found for {where} (jest, vitest, mocha, ava, tape or node --test in its "
                             "test script, configuration or dependencies)")
        invocation = script_invocation(project.package_json(package_dir), evidence.runner)
        if override is None or not override.test_cmd:
            rules = javascript_paths(files)
            test_files = [path for path in touched if rules.classify(path) == "test" and code_suffix(path)
                          and not rules.is_test_config(path)]
            reason = browser_only_reason(project, evidence.runner, test_files, package_dir,
                                         runner_test_patterns(files, evidence.runner))
            if reason:
                raise InputError(reason)
        install = list(environment.install)
        pin = environment.pin
        system_packages: list[str] = []
        # The runner and the options its npm script gives it (node's own flags for `node --test`).
        test_cmd = shlex.join([evidence.runner, *((invocation.node_options if evidence.runner == "node"
                                                   else invocation.options) if invocation else ())])
        if override is not None:
            if override.date_pin is False and pin.kind == "before":
                pin = DatePin("none", "the override drops the date pin")
                install = list(_with_pin(environment, pin))
            elif isinstance(override.date_pin, str) and pin.kind != "lockfile":
                pin = DatePin("before", f"{override.date_pin}T00:00:00Z")
                install = list(_with_pin(environment, pin))
            if override.install is not None:
                install = list(override.install)
            install = [*override.pre_install, *install, *override.extra_install]
            system_packages = list(override.system_packages)
            test_cmd = override.test_cmd or test_cmd
        return EnvSpec(
            python=NODE_BASE_PYTHONS.get(environment.node, LOCAL_NODE_PYTHON), python_reason="the Node base's system Python",
            base=f"node{environment.node}", node=environment.node, node_reason=environment.node_reason,
            package_manager=environment.package_manager.name, system_packages=system_packages, install=install,
            test_cmd=test_cmd, date_pin=pin.detail if pin.kind == "before" else None,
            dependency_pin=_pin_text(pin), test_runner=evidence.runner, package_dir=package_dir,
            test_env=dict(invocation.env) if invocation and not (override and override.test_cmd) else {},
            added_dependencies=dependencies_added(project, patches, package_dir),
        )

    def install_ladder(self, spec: EnvSpec, files: RepoFiles, override=None,
                       bases: Sequence[str] | None = None) -> list[tuple[str, EnvSpec]]:
        """``inferred`` (``spec``), then the profile's fallbacks (:func:`.environment.install_ladder`):
        install scripts off, ``npm install`` for an npm lock file out of step with package.json, no
        ``--before`` pin (a registry that does not serve true publication dates refuses it); then,
        when the unpinned install is on an older Node than the newest base ``engines.node`` allows,
        the same on that Node (today's dependencies of an old project need today's Node). An
        override's own install has no fallbacks; :meth:`rungs_after_failure` adds the
        ``--legacy-peer-deps`` rungs npm 7+ needs for old peer-dependency conflicts."""
        rungs = [("inferred", spec)]
        if override is not None and override.install is not None:
            return rungs
        environment = self._environment(spec, files)
        before, after = _own_commands(override)
        for name, commands in install_ladder(environment)[1:]:
            update: dict = {"install": [*before, *commands, *after]}
            if name.startswith("unpinned"):
                update |= {"date_pin": None, "dependency_pin": _pin_text(DatePin("none", "the registry refused --before"))}
            candidate = spec.model_copy(update=update)
            if all(candidate.install != earlier.install for _, earlier in rungs):
                rungs.append((name, candidate))
            newer = _newest_allowed_node(ProjectFiles.of(files), available_nodes(bases))
            if name == "unpinned" and newer is not None and int(newer) > int(spec.node or "0"):
                rungs.append((f"{name}+newer-node", candidate.model_copy(update={
                    "node": newer, "base": f"node{newer}", "python": NODE_BASE_PYTHONS.get(newer, LOCAL_NODE_PYTHON),
                    "node_reason": f"the newest Node engines allows, for dependencies of today (was {spec.node})"})))
        return rungs

    def _environment(self, spec: EnvSpec, files: RepoFiles) -> JsEnvironment:
        kind, _, detail = (spec.dependency_pin or "none").partition(" ")
        return JsEnvironment(node=spec.node or "18", node_reason=spec.node_reason or "",
                             package_manager=package_manager(ProjectFiles.of(files)), pin=DatePin(kind, detail),
                             install=tuple(spec.install), install_env=dict(INSTALL_ENV))

    def dependency_fingerprint(self, files: RepoFiles) -> str:
        """Every package.json (without its ``version``), lock file and package-manager setting, and
        the patches the install applies."""
        digest = hashlib.sha256()
        for path in sorted(name for name in files.listing() if _DEPENDENCY_FILE.search(name)
                           and "node_modules/" not in name):
            text = files.read(path) or ""
            if path.endswith("package.json"):
                text = _without_version(text)
            digest.update(f"{path}\0{text}\0".encode())
        return digest.hexdigest()[:16]

    def own_code(self, files: RepoFiles) -> JsOwnCode:
        project = ProjectFiles.of(files)
        names = [project.package_json(folder).get("name") for folder in ["", *workspace_packages(project)]]
        return JsOwnCode(tuple(dict.fromkeys(name for name in names if isinstance(name, str) and name)))

    def env_layer(self, spec: EnvSpec, own: JsOwnCode, scm_version: str, *, agent_uid: int) -> EnvLayer:
        environment = " ".join(f"{name}={shlex.quote(value)}" for name, value in sorted(INSTALL_ENV.items()))
        install = "; ".join(f"({command})" for command in spec.install) or "true"
        # What the PR adds to package.json, once the base commit's install worked (set -e): the
        # gold patch, and a fix that adds the same dependency, need it in the network-less sandbox.
        added = added_dependencies_install(
            spec.package_manager or "npm", spec.added_dependencies, before=spec.date_pin,
            ignore_scripts=any("--ignore-scripts" in command or "--mode=skip-build" in command for command in spec.install))
        if added:
            install = f"{install}; ({added})"
        kept = " ".join(f"! -name {shlex.quote(name)}" for name in (".pnp.cjs", ".pnp.loader.mjs", ".pnp.data.json"))
        # After installing, only what the install put in node_modules (and Yarn's PnP state) stays:
        # the tracked files (and .git) come back with the task layer, and files an install script
        # built from the sources would be the env commit's code. The caches go too.
        clear = (f"find /testbed -mindepth 1 -name node_modules -prune -o -path /testbed/.yarn -prune -o "
                 f"\\( -type f -o -type l \\) {kept} -exec rm -f {{}} +; "
                 "find /testbed -mindepth 1 -depth -type d -empty ! -path '*/node_modules/*' -delete")
        cache = f"if [ -d /testbed/node_modules ]; then mkdir -p /testbed/node_modules/.cache && chown {agent_uid}:{agent_uid} /testbed/node_modules/.cache; fi"
        run = (f"set -e; cd /testbed; export {environment}; {install}; {clear}; {cache}; "
               f"rm -rf /root/.npm /root/.cache /root/.yarn /root/.local/share/pnpm /usr/local/share/.cache; "
               f"chown {agent_uid}:{agent_uid} /testbed")
        return EnvLayer(run=run, tools=self.shipped_tools(), labels={"repo2env.node": spec.node or "",
                                                       "repo2env.package_manager": spec.package_manager or ""},
                        base_hint=f"run 'repo2env runtime bootstrap --node {spec.node}'")

    def shipped_tools(self) -> dict[str, str]:
        """The own-code probe and our reporters (and the stream module they share), where the runner
        plans expect them, in TOOLS_DIR: the same for every task."""
        return {"own_code_probe.js": (_HERE / "own_code_probe.js").read_text(),
                **{str(PurePosixPath(path).relative_to(TOOLS_DIR)): text for path, text in reporter_sources().items()}}

    def task_layer(self, spec: EnvSpec, own: JsOwnCode, task: Task) -> TaskLayer:
        """The generated files' names in ``.git/info/exclude``, and the runner's transform cache filled
        for the base commit's suite (:func:`~repo2env.languages.javascript.runners.cache_warmup_command`)."""
        lines = "\\n".join(GENERATED)
        warmup = (cache_warmup_command(spec.test_runner, directory=spec.package_dir or "",
                                       invocation=spec_invocation(spec)) if spec.test_runner else None)
        return TaskLayer(run=f"mkdir -p .git/info && printf '{lines}\\n' >> .git/info/exclude && "
                             "chown -R --reference=.git .git/info", cache_warmup=warmup)

    def image_facts(self, shell: Shell, spec: EnvSpec, task: Task) -> dict[str, Any]:
        """The names each hidden test file's top level declares tests with, for a runner whose files
        import them (vitest, ava, tape, ``node --test``): read from the whole file as a grading
        restores it (:func:`restored_test_files`), since a PR that only changes tests shows no import
        in its hunks. A file that cannot be read is left out (the grader then reads its hunks)."""
        modules = IMPORTED_TEST_API.get(spec.test_runner or "", ())
        if not modules:
            return {}
        return {"test_callees": {path: file_callees(text, path, modules)
                                 for path, text in restored_test_files(shell, task).items()}}

    def check_image(self, shell: Shell, task: Task, spec: EnvSpec, own: JsOwnCode, *, log_path: Path,
                    collect_check: bool, timeout_s: float, stall_idle_s: float = STALL_IDLE_S) -> str | None:
        """The own-code probe from the folders of the tests the PR touches, then those test files
        that exist at the base run with the project's runner: some test of them must report."""
        touched = _test_files(task)
        # Test data the PR adds is run by the test files that read it (marked's Markdown specs).
        data = data_files([file.path for file in parse(task.test_patch).files if not file.is_deleted])
        if data and spec.test_runner:
            touched += [path for path in tests_reading_data(data, ShellFiles(shell), spec.test_runner,
                                                            spec.package_dir or "") if path not in touched]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        folders = sorted({path.rpartition("/")[0] for path in touched}) or [spec.package_dir or ""]
        imported = _names_tests_import(shell, task, folders, own.names)
        settings = {"names": list(imported), "from": folders,
                    "unimported": [name for name in own.names if name not in imported]}
        probe = shlex.join(["node", PROBE, "check", json.dumps(settings)])
        checked = shell.exec(probe, timeout=60)
        log_path.write_text(f"$ {probe}\n{checked.output}\n(exit {checked.exit_code})\n")
        if checked.exit_code != 0:
            reasons = [line.split(OWN_CODE_MARKER, 1)[1] for line in checked.output.splitlines()
                       if OWN_CODE_MARKER in line]
            detail = "; ".join(reasons) if reasons else checked.output.strip()[-200:]
            return f"the project's own code is not what runs in the task image: {detail}"[:400]
        existing = [path for path in touched if shell.exec(["test", "-f", path], timeout=10).exit_code == 0]
        if not collect_check or not spec.test_runner:
            return None
        if not existing:
            # The PR only adds test files: one of the suite's own, nearest the new ones, shows the
            # runner works in the image.
            listed = shell.exec(["git", "ls-files", "-z"], timeout=60).output.split("\0")
            near = {path.rpartition("/")[0] for path in touched}
            suite = sorted((path for path in listed if is_test_file(path)),
                           key=lambda path: (path.rpartition("/")[0] not in near, path.count("/"), path))
            existing = suite[:1]
            if not existing:
                return None
        invocation = None
        package = shell.exec(["cat", f"{spec.package_dir}/package.json" if spec.package_dir else "package.json"],
                             timeout=10)
        if package.exit_code == 0:
            try:
                invocation = script_invocation(json.loads(package.output), spec.test_runner)
            except ValueError:
                invocation = None
        plan = plan_run(spec.test_runner, existing, _REPORTS, directory=spec.package_dir or "", invocation=invocation)
        result = shell.exec(["sh", "-c", plan.command], timeout=timeout_s)
        reports = {report.path: shell.exec(["cat", report.path], timeout=30) for report in plan.reports}
        reported = reported_outcomes(plan, lambda path: reports[path].output if reports[path].exit_code == 0 else None)
        with log_path.open("a") as log:
            log.write(f"$ {plan.command}\n{result.output}\n(exit {result.exit_code})\n")
            log.write("outcomes: " + json.dumps({key: str(value) for key, value in sorted(reported.items())}) + "\n")
        if result.timed_out:
            return f"{COLLECTION_TIMEOUT} after {timeout_s:.0f} s"
        ran = {split_test_id(key)[0] for key, _ in reported.items() if split_test_id(key)[1]}
        if not ran:
            failed = [path for path in existing if str(reported.get(path, "")) == "error"]
            tail = result.output.strip().splitlines()[-1:] or ["no report was written"]
            what = "do not load" if failed else "report no test"
            return f"the PR's test files {what} with {spec.test_runner}: {tail[0].strip()[:200]}"
        return None

    def explain_failure(self, log: str, spec: EnvSpec) -> str | None:
        log = plain_log(log)
        kind = "peer_dependencies" if "ERESOLVE" in log else install_failure_reason(log)
        # The last error line that says something: not where npm wrote its debug log, nor the advice
        # it prints under an ETARGET.
        errors = [line.strip() for line in log.splitlines() if re.search(r"npm ERR!|npm error|ERR_PNPM|YN\d{4}|error ", line)
                  and not re.search(r"A complete log of this run|/_logs/|^\W*(?:npm )?(?:ERR!|error)\W*$|"
                                    r"notarget (?:In most cases|a package version that)", line.strip())]
        if kind == "install_failed" and not errors:
            return None  # the build's own message: no install error to quote
        return f"{_FAILURES.get(kind, kind)}{': ' + errors[-1][:200] if errors else ''}"

    def rungs_after_failure(self, log: str, failed: tuple[str, EnvSpec],
                            pending: list[tuple[str, EnvSpec]]) -> list[tuple[str, EnvSpec]]:
        # A registry that refuses --before refuses it on every rung that keeps the pin.
        if install_failure_reason(log) == "registry_dates":
            pending = [(name, spec) for name, spec in pending if spec.date_pin is None]
        # A lock file that fetches a package from a git host sends every rung that installs from
        # it there again (marked 2024-2025: @markedjs/testutils from a github.com tarball).
        if install_failure_reason(log) == "git_host_dependency" and (failed[1].dependency_pin or "").startswith("lockfile"):
            pending = [(name, spec) for name, spec in pending if not (spec.dependency_pin or "").startswith("lockfile")]
        # npm 7+ refuses the peer-dependency conflicts older projects were published with, on every
        # rung: the failed one again, and every later one, accept them.
        if "ERESOLVE" in log:
            name, spec = failed
            lenient = [(f"{name}+legacy-peer-deps", _lenient(spec))] if _lenient(spec) != spec else []
            pending = [*lenient, *((name, _lenient(spec)) for name, spec in pending)]
        return pending

    def packages_needed(self, log: str) -> list[str]:
        # A native module built from source (node-gyp) needs a compiler and make.
        return ["build-essential"] if "gyp ERR!" in log and ("make" in log or "g++" in log or "cc" in log) else []


_FAILURES = {
    "registry_dates": "the registry refused --before (its packuments' dates are not publication dates)",
    "lockfile_out_of_sync": "the lock file is out of step with package.json",
    "git_host_dependency": "a dependency is fetched from a git host, not from the registry (only the registry may be reachable)",
    "native_build": "a native module failed to build",
    "network": "the registry could not be reached",
    "missing_version": "the registry has no version a dependency range asks for (a registry mirror may lack it)",
    "install_failed": "the install failed",
    "node_version": "a dependency does not support this Node",
    "peer_dependencies": "npm refuses the project's peer-dependency conflicts (ERESOLVE)",
}


def _package_dir(project: ProjectFiles, touched: Sequence[str]) -> str:
    """The workspace package the change touches when it touches exactly one; '' (the root) else."""
    if not touched or not workspace_packages(project):
        return ""
    packages = [package for package in packages_touched(project, touched) if package]
    return packages[0] if len(packages) == 1 else ""


def _with_pin(environment: JsEnvironment, pin: DatePin) -> tuple[str, ...]:
    from repo2env.languages.javascript.environment import install_commands

    return install_commands(environment.package_manager, pin)


def _lenient(spec: EnvSpec) -> EnvSpec:
    return spec.model_copy(update={"install": [_lenient_peers(command) for command in spec.install]})


def _newest_allowed_node(project: ProjectFiles, nodes: Sequence[str]) -> str | None:
    """The newest of ``nodes`` that the root's ``engines.node`` allows (any, without one)."""
    engines = project.package_json().get("engines")
    wanted = engines.get("node") if isinstance(engines, dict) else None
    allowed = [node for node in nodes if not isinstance(wanted, str) or node_range_allows(wanted, int(node)) is not False]
    return max(allowed, key=int, default=None)


def _lenient_peers(command: str) -> str:
    """An ``npm install``/``npm ci`` command that accepts peer-dependency conflicts (npm 7+'s ERESOLVE)."""
    if re.match(r"(?:cd \S+ && )?npm (?:install|ci)\b", command) and "--legacy-peer-deps" not in command:
        return f"{command} --legacy-peer-deps"
    return command


def _pin_text(pin: DatePin) -> str:
    if pin.kind == "none":
        return f"none ({pin.detail})"
    return f"{pin.kind} {pin.detail}"


def _own_commands(override) -> tuple[list[str], list[str]]:
    if override is None:
        return [], []
    return list(override.pre_install), list(override.extra_install)


def _without_version(text: str) -> str:
    try:
        package = json.loads(text)
    except ValueError:
        return text
    if isinstance(package, dict):
        package.pop("version", None)
    return json.dumps(package, sort_keys=True)


def restored_test_files(shell: Shell, task: Task) -> dict[str, str]:
    """The text of each JavaScript or TypeScript file the task's test patch leaves, as a grading
    restores it: the file at the image's snapshot (``HEAD`` of /testbed, what restore.py reverts a
    hidden test file to before it applies the hidden tests) with the test patch applied. A file
    whose snapshot text cannot be read whole, or where the patch does not apply, is left out."""
    files = [file for file in parse(task.test_patch).files
             if not file.is_deleted and not file.is_binary and code_suffix(file.path) is not None]
    existing = list(dict.fromkeys(file.old_path for file in files if file.old_path is not None))
    before = {path: text for path, text in _read_texts(shell, _READ_SNAPSHOT, existing).items() if text is not None}
    restored = {}
    for file in files:
        if file.old_path is not None and file.old_path not in before:
            continue
        try:
            text = apply_to_text(file, before.get(file.old_path) if file.old_path is not None else None)
        except PatchError:
            continue
        if text is not None:
            restored[file.path] = text
    return restored


def _names_tests_import(shell: Shell, task: Task, folders: Sequence[str], names: Sequence[str]) -> tuple[str, ...]:
    """The names of ``names`` (the project's packages) that a test file under ``folders`` imports or
    requires by name, at the base (read in the image) or in the lines the PR's tests add: those the
    tests resolve through ``node_modules``. Every name when the files cannot be read, so that a
    failure to read never skips the check."""
    if not names:
        return ()
    under = [f"{folder}/" if folder else "" for folder in folders]
    rules = javascript_paths(None)

    def is_read(path: str) -> bool:
        return (code_suffix(path) is not None and rules.classify(path) == "test"
                and any(path.startswith(prefix) for prefix in under))

    # git grep narrows the files to read to those that mention a name at all.
    grep = ["git", "grep", "-l", "-z", "-F", *(part for name in names for part in ("-e", name)), "--",
            *(folder or "." for folder in folders)]
    found = shell.exec(grep, timeout=60)
    if found.exit_code not in (0, 1) or found.truncated:
        return tuple(names)
    candidates = [path for path in found.output.split("\0") if path and is_read(path)] if found.exit_code == 0 else []
    read = _read_texts(shell, _READ_FILES, candidates)
    if len(read) != len(candidates) or None in read.values():
        return tuple(names)
    texts = list(read.items())
    texts += [(file.path, "\n".join(file.added_lines)) for file in parse(task.test_patch).files
              if not file.is_deleted and is_read(file.path)]
    used: set[str] = set()
    for path, text in texts:
        used |= imported_packages(text, code_suffix(path) or ".js", among=names) & set(names)
    return tuple(name for name in names if name in used)


#: Prints the texts of the files named after ``--`` as one JSON list (null for one it cannot read).
_READ_FILES = ("const fs = require('fs'); console.log(JSON.stringify(process.argv.slice(1).map(function (p) {"
               " try { return fs.readFileSync(p, 'utf8'); } catch (e) { return null; } })));")
_READ_BATCH = 200


def _read_texts(shell: Shell, script: str, paths: Sequence[str]) -> dict[str, str | None]:
    """``script``'s texts of ``paths`` (None for a file it could not read), in batches of
    :data:`_READ_BATCH`; the paths of a batch whose answer was not a whole list are left out."""
    texts: dict[str, str | None] = {}
    for start in range(0, len(paths), _READ_BATCH):
        batch = list(paths[start:start + _READ_BATCH])
        read = shell.exec(["node", "-e", script, "--", *batch], timeout=60)
        try:
            # The last line: JSON escapes a newline in a string, not U+2028, so no splitlines().
            contents = json.loads(read.output.strip().split("\n")[-1]) if read.exit_code == 0 and not read.truncated else None
        except ValueError:
            contents = None
        if isinstance(contents, list) and len(contents) == len(batch):
            texts.update((path, text if isinstance(text, str) else None) for path, text in zip(batch, contents, strict=True))
    return texts
#: The same for the files' text at the snapshot's commit (``git cat-file``: not the work tree).
_READ_SNAPSHOT = ("const { execFileSync } = require('child_process'); console.log(JSON.stringify("
                  "process.argv.slice(1).map(function (p) { try { return execFileSync('git', ['cat-file', 'blob', "
                  "'HEAD:' + p], { encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'ignore'] }); }"
                  " catch (e) { return null; } })));")


def _test_files(task: Task) -> list[str]:
    """The JavaScript test files the PR's tests change (their paths after the change)."""
    return [file.path for file in parse(task.test_patch).files if is_test_file(file.path)]

