"""Test runner adapters: jest, vitest, mocha, jasmine, ava, tape and ``node --test``.

For each runner: how to tell a project uses it (:func:`detect_runners`), the options its npm
script passes it (:func:`script_invocation`), the shell command that runs exactly a list of test
ids with a machine-readable report (:func:`plan_run`), how to read that report back
(:func:`read_outcomes`), and which files it reads for configuration (:func:`config_files`).

Selecting tests: the files of the ids are passed as paths, and the titles as one name pattern
(a JavaScript regular expression, every title escaped) where the runner has one: jest and vitest
``-t``, mocha ``--grep`` and jasmine ``--filter`` match the full name (describe titles and the title joined by spaces,
anchored), ``node --test --test-name-pattern`` a test's name, ava ``--match`` a title (a glob: a
``*`` in a title matches itself among others). tape has no name filter: the whole file runs. The
pattern may select more tests than asked (two titles whose space-joined names coincide); only the
requested ids are read from the report. An id naming a whole file runs the file unfiltered.

Runners that stop at the first file that fails to load (mocha, jasmine), or whose report cannot tell files
apart (TAP of ava, tape, node), run one process per file, each with its own report.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from repo2env.languages.javascript.project import ProjectFiles, dependencies, join, scripts
from repo2env.languages.javascript.reports import (
    ReportError,
    keep_worse,
    parse_ava_tap,
    parse_jasmine_json,
    parse_jest_json,
    parse_mocha_json,
    parse_node_stream,
    parse_node_tap,
    parse_tape_stream,
    parse_tape_tap,
    requested_outcomes,
)
from repo2env.languages.javascript.test_ids import split_test_id, test_id
from repo2env.outcomes import TestStatus

RUNNERS = ("jest", "vitest", "mocha", "jasmine", "ava", "tape", "node")
#: Where the grading sandbox finds the mocha reporter (``mocha_reporter.js`` of this package),
#: outside /testbed so that a patch cannot change it.
MOCHA_REPORTER_PATH = "/opt/repo2env/mocha_reporter.js"
#: The same for jasmine's reporter (``jasmine_reporter.js``).
JASMINE_REPORTER_PATH = "/opt/repo2env/jasmine_reporter.js"
#: Where each runner's test files get the functions they declare tests with (runner -> the modules
#: they import or require them from; () for runners whose ``describe``/``it`` are globals: mocha's,
#: jest's, jasmine's). The grader's canaries are written with the names a file imports from these
#: (:mod:`.test_callees`): ``it``/``describe`` from 'vitest' (globals only with its ``globals``
#: option), ava's and tape's default export ``test``, ``test``/``describe``/``it`` from 'node:test'.
IMPORTED_TEST_API: dict[str, tuple[str, ...]] = {
    "mocha": (), "jest": (), "jasmine": (), "vitest": ("vitest",), "ava": ("ava",), "tape": ("tape", "tap"),
    "node": ("node:test",),
}
#: The report format each runner's plan writes (:attr:`Report.format`).
REPORT_FORMATS = {"jest": "jest-json", "vitest": "jest-json", "mocha": "mocha-json", "jasmine": "jasmine-json",
                  "ava": "ava-tap", "tape": "tape-tap", "node": "node-tap"}
#: The same for jest's reporter of the live outcome stream (``jest_reporter.js``, beside ``--json``).
JEST_REPORTER_PATH = "/opt/repo2env/jest_reporter.js"
#: The same for vitest's (``vitest_reporter.mjs``, beside its ``json`` reporter).
VITEST_REPORTER_PATH = "/opt/repo2env/vitest_reporter.mjs"
#: The same for Node's test runner (``node_reporter.mjs``, beside its ``tap`` reporter).
NODE_REPORTER_PATH = "/opt/repo2env/node_reporter.mjs"
#: The module our reporters share (``outcome_stream.js``).
OUTCOME_STREAM_PATH = "/opt/repo2env/outcome_stream.js"
#: The program that starts tape with its outcomes streamed (``tape_stream.js``: tape has no
#: reporters of its own).
TAPE_STREAM_PATH = "/opt/repo2env/tape_stream.js"
#: Where each reporter of this package goes in an image -> its file beside this module (with the
#: module they share, ``outcome_stream.js``, which they load from their own folder).
REPORTER_FILES = {MOCHA_REPORTER_PATH: "mocha_reporter.js", JASMINE_REPORTER_PATH: "jasmine_reporter.js",
                  JEST_REPORTER_PATH: "jest_reporter.js", VITEST_REPORTER_PATH: "vitest_reporter.mjs",
                  NODE_REPORTER_PATH: "node_reporter.mjs", TAPE_STREAM_PATH: "tape_stream.js",
                  OUTCOME_STREAM_PATH: "outcome_stream.js"}
#: Where jest keeps its transform cache in every run of ours (derivation, grading, the task image's
#: warm-up, :func:`cache_warmup_command`): the same folder in each, so the cache the image was built
#: with is hit (jest's cache key holds the folder), and outside /testbed, where no patch reaches
#: (a project's own ``cacheDirectory`` may lie in its tree).
JEST_CACHE_DIR = "/tmp/.repo2env-jest-cache"
#: The options every jest run of ours gives (the plan's and the warm-up's): no coverage (it
#: instruments, another cache key), no watching, our cache folder.
_JEST_FIXED = f"--coverage=false --watchAll=false --cacheDirectory={JEST_CACHE_DIR}"
#: A test-name pattern no test's name matches: a run with it loads every test file, runs none.
_NO_TEST_NAME = "^repo2env-cache-warm-up: no test has this name$"
#: Runners whose reporters (ours) send every outcome live to the grading's root collector as well
#: (``outcome_stream.js``): a grading reads their outcomes from that stream, the reports being the
#: cross-check. ava has none: it has no reporter plugins, and its tests run in worker processes
#: (a worker thread or a child process per file) whose results reach only its own reporters.
STREAM_RUNNERS = frozenset({"mocha", "jasmine", "jest", "vitest", "node", "tape"})
#: The descriptor a plan opens the collector's FIFO as, for the reporters to write to.
OUTCOME_FD = 9


def reporter_sources() -> dict[str, str]:
    """Our reporters' text by the path a plan expects them at (root-owned, outside /testbed)."""
    here = Path(__file__).parent
    return {path: (here / name).read_text(encoding="utf-8") for path, name in REPORTER_FILES.items()}

# --- configuration files ----------------------------------------------------------------------

#: Files any runner (or Node's module loader, or the package manager that starts it) reads.
COMMON_CONFIG_PATTERNS = (
    "package.json", "*/package.json", ".npmrc", "*/.npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs",
    "pnpm-workspace.yaml", ".pnp.cjs", ".pnp.loader.mjs", "babel.config.*", "*/babel.config.*", ".babelrc",
    ".babelrc.*", "*/.babelrc", "*/.babelrc.*", "tsconfig*.json", "*/tsconfig*.json", "jsconfig.json", ".swcrc",
    ".env", ".env.*", "node_modules/*", "*/node_modules/*",
)
#: Files each runner reads for configuration (fnmatch patterns; ``*`` crosses ``/``).
RUNNER_CONFIG_PATTERNS: dict[str, tuple[str, ...]] = {
    "jest": ("jest.config.*", "*/jest.config.*", "jest.setup*", "*/jest.setup*", "jest-setup*", "*/__mocks__/*",
             "__mocks__/*", "*/jest.preset.*", "jest.preset.*", "*/setupTests.*", "setupTests.*"),
    "vitest": ("vitest.config.*", "*/vitest.config.*", "vite.config.*", "*/vite.config.*", "vitest.workspace.*",
               "vitest.projects.*", "vitest.setup*", "*/vitest.setup*", "*/setupTests.*", "setupTests.*",
               "*/__mocks__/*", "__mocks__/*"),
    "mocha": (".mocharc*", "*/.mocharc*", "test/mocha.opts", "*/test/mocha.opts"),
    "jasmine": ("jasmine.json", "*/jasmine.json", "spec/support/jasmine.json", "*/spec/support/jasmine.json",
                "spec/helpers/*", "*/spec/helpers/*"),
    "ava": ("ava.config.*", "*/ava.config.*"),
    "tape": (),
    "node": (),
}
#: package.json fields the runner (or Node's loader) reads; restore them, keep the patch's others.
PACKAGE_JSON_FIELDS: dict[str, tuple[str, ...]] = {
    "jest": ("jest", "babel"), "vitest": (), "mocha": ("mocha",), "jasmine": (), "ava": ("ava",), "tape": (),
    "node": (),
}
COMMON_PACKAGE_JSON_FIELDS = ("scripts", "type", "imports", "workspaces", "packageManager", "engines", "volta")


def config_files(runner: str, files: ProjectFiles | Mapping[str, str], directory: str = "") -> list[str]:
    """Every file at the commit that ``runner`` (started in ``directory``) or Node's loader reads for
    configuration: the config files by name, and the files its npm script and package.json config
    name (``--require``/``--import``/``--loader``/``--config`` values, jest's setup files)."""
    files = ProjectFiles.of(files)
    found = set(files.glob(*COMMON_CONFIG_PATTERNS, *RUNNER_CONFIG_PATTERNS[runner]))
    package = files.package_json(directory)
    invocation = script_invocation(package, runner)
    named = list(invocation.referenced_files) if invocation else []
    jest_config = package.get("jest") if runner == "jest" else None
    if isinstance(jest_config, dict):
        for key in ("setupFiles", "setupFilesAfterEach", "setupFilesAfterEnv", "globalSetup", "globalTeardown",
                    "testEnvironment", "snapshotResolver", "testSequencer", "resolver", "preset"):
            value = jest_config.get(key)
            named.extend(value if isinstance(value, list) else [value] if isinstance(value, str) else [])
    # Config files are code (jest.config.js, vitest.config.ts, .mocharc.js): the local files their
    # string literals name as test support (setup files, environments, resolvers) configure the
    # run as well. Source files they name (an alias to src/index.ts) are the fix's to change.
    for config in sorted(found):
        if config.endswith(("package.json", ".npmrc", ".env")) or "node_modules/" in config:
            continue
        text = files.read(config) or ""
        base = config.rsplit("/", 1)[0] if "/" in config else ""
        named.extend(join(base, literal) if base and not directory else literal
                     for literal in _LOCAL_PATH_LITERAL.findall(text) if _TEST_SUPPORT.search(literal))
    for name in named:
        path = join(directory, name.replace("<rootDir>/", "").removeprefix("./"))
        for candidate in (path, *(f"{path}{suffix}" for suffix in (".js", ".cjs", ".mjs", ".ts"))):
            if files.exists(candidate):
                found.add(candidate)
    return sorted(found)


_TEST_SUPPORT = re.compile(r"(?:^|/)(?:tests?|__tests__|specs?|__mocks__|e2e)/|"
                           r"(?:^|/)[^/]*(?:setup|config|env|mock|global|teardown|environment|resolver|sequencer|"
                           r"preset)[^/]*$", re.IGNORECASE)
_LOCAL_PATH_LITERAL = re.compile(r"""["'](?:<rootDir>/|\./)?((?:[\w@.-]+/)*[\w@.-]+\.(?:[cm]?[jt]sx?|json))["']""")


# --- detection --------------------------------------------------------------------------------

_RUNNER_PACKAGES = {"jest": ("jest",), "vitest": ("vitest",), "mocha": ("mocha",), "jasmine": ("jasmine",), "ava": ("ava",),
                    "tape": ("tape", "tap-spec", "faucet"), "node": ()}
#: Config files that show a runner is used (vite.config.* alone is a bundler's, not vitest's).
_DETECT_CONFIG = {"jest": ("jest.config.*",), "vitest": ("vitest.config.*", "vitest.workspace.*"),
                  "mocha": (".mocharc*", "test/mocha.opts"), "jasmine": ("spec/support/jasmine.json", "jasmine.json"),
                  "ava": ("ava.config.*",)}
_RUNNER_COMMAND = {
    "jest": re.compile(r"(?:^|[\s/;&|(])jest(?:\s|$|;|&)"),
    "vitest": re.compile(r"(?:^|[\s/;&|(])vitest(?:\s|$|;|&)"),
    "mocha": re.compile(r"(?:^|[\s/;&|(])_?mocha(?:\s|$|;|&)"),
    "jasmine": re.compile(r"(?:^|[\s/;&|(])jasmine(?:\s|$|;|&)"),
    "ava": re.compile(r"(?:^|[\s/;&|(])ava(?:\s|$|;|&)"),
    "tape": re.compile(r"(?:^|[\s/;&|(])tape(?:\s|$|;|&)"),
    "node": re.compile(r"(?:^|[\s/;&|(])node\s+(?:[^&|;]*\s)?--test(?:\s|$|=)"),
}


@dataclass(frozen=True)
class RunnerEvidence:
    """A runner a package uses and why we think so (strongest first in :func:`detect_runners`)."""

    runner: str
    reason: str
    strength: int  # 3: the test script runs it, 2: another test script, 1: config file, 0: a dependency


def detect_runners(files: ProjectFiles | Mapping[str, str], directory: str = "") -> list[RunnerEvidence]:
    """The test runners the package in ``directory`` uses, strongest evidence first."""
    files = ProjectFiles.of(files)
    package = files.package_json(directory)
    package_scripts = scripts(package)
    declared = dependencies(package)
    found: dict[str, RunnerEvidence] = {}

    def note(runner: str, reason: str, strength: int) -> None:
        if runner not in found or found[runner].strength < strength:
            found[runner] = RunnerEvidence(runner, reason, strength)

    for name, command in _test_scripts(package_scripts):
        for runner, pattern in _RUNNER_COMMAND.items():
            if pattern.search(command):
                note(runner, f"scripts.{name} runs {runner if runner != 'node' else 'node --test'}",
                     3 if name == "test" else 2)
    for runner in RUNNERS:
        present = files.glob(*(join(directory, pattern) for pattern in _DETECT_CONFIG.get(runner, ())))
        if present:
            note(runner, f"{present[0]} exists", 1)
        field_name = PACKAGE_JSON_FIELDS[runner][0] if PACKAGE_JSON_FIELDS[runner] else None
        if field_name and field_name in package:
            note(runner, f"package.json has a {field_name!r} field", 1)
        for dependency in _RUNNER_PACKAGES[runner]:
            if dependency in declared:
                note(runner, f"depends on {dependency} {declared[dependency]}", 0)
    return sorted(found.values(), key=lambda evidence: (-evidence.strength, RUNNERS.index(evidence.runner)))


def detect_runner(files: ProjectFiles | Mapping[str, str], directory: str = "") -> RunnerEvidence | None:
    """The runner the package's tests most likely run under, or None (its own runner, or none)."""
    found = detect_runners(files, directory)
    return found[0] if found else None


def _test_scripts(package_scripts: Mapping[str, str]) -> list[tuple[str, str]]:
    """Scripts that run tests: ``test`` and the scripts it calls (``npm run X``, depth first, in
    order), then the other ``test*``/``spec*``/``unit*`` scripts by name."""
    ordered: list[tuple[str, str]] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen or name not in package_scripts:
            return
        seen.add(name)
        command = package_scripts[name]
        ordered.append((name, command))
        for called in _NPM_RUN.findall(command):
            visit(called)

    visit("test")
    for name in sorted(package_scripts):
        if re.match(r"(?:test|spec|unit)(?:$|[:_-])", name):
            visit(name)
    return ordered


_NPM_RUN = re.compile(r"(?:npm|pnpm|yarn)\s+(?:run(?:-script)?\s+)?([\w:.-]+)")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)")


def _assignments(prefix: str) -> dict[str, str]:
    """The variables a segment's words before ``npm run X`` set (``TZ=UTC``, ``cross-env A=1``):
    none when another command comes first (``echo A=1 npm run X`` sets nothing)."""
    words = prefix.split()
    if not all(_ASSIGNMENT.fullmatch(word) or word in _WRAPPERS for word in words):
        return {}
    return {match.group(1): match.group(2).strip("'\"") for word in words if (match := _ASSIGNMENT.fullmatch(word))}


# --- the npm script's invocation --------------------------------------------------------------

#: Options that take a value, per runner (the value is the next token unless given with "=").
_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "jest": frozenset({"-c", "--config", "--env", "--testEnvironment", "--rootDir", "--roots", "--maxWorkers", "-w",
                       "--setupFiles", "--setupFilesAfterEnv", "--testTimeout", "--testPathIgnorePatterns",
                       "--testRegex", "--testMatch", "-t", "--testNamePattern", "--testPathPattern", "--outputFile",
                       "--reporters", "--selectProjects", "--shard", "--seed", "--testRunner", "--moduleDirectories",
                       "--coverageDirectory", "--collectCoverageFrom", "--cacheDirectory"}),
    "vitest": frozenset({"-c", "--config", "--root", "-r", "--dir", "--environment", "--pool", "--project",
                         "-t", "--testNamePattern", "--reporter", "--outputFile", "--testTimeout", "--shard",
                         "--mode", "--maxWorkers", "--minWorkers", "--exclude", "--retry"}),
    "mocha": frozenset({"-r", "--require", "-R", "--reporter", "-O", "--reporter-option", "--reporter-options",
                        "-t", "--timeout", "-u", "--ui", "-g", "--grep", "-f", "--fgrep", "--file", "--extension",
                        "--config", "--package", "-s", "--slow", "--retries", "--spec", "--ignore", "--exclude",
                        "-j", "--jobs", "--loader", "--import", "-n", "--node-option", "--opts",
                        "--compilers"}),
    "jasmine": frozenset({"--reporter", "--filter", "--helper", "--require", "--seed"}),
    "ava": frozenset({"-m", "--match", "--config", "-c", "--concurrency", "-T", "--timeout", "--node-arguments",
                      "--tap-reporter"}),
    "tape": frozenset({"-r", "--require", "-i", "--ignore", "--ignore-pattern"}),
    "node": frozenset({"-r", "--require", "--import", "--loader", "--experimental-loader", "--test-reporter",
                       "--test-reporter-destination", "--test-name-pattern", "--test-skip-pattern",
                       "--test-concurrency", "--test-timeout", "--conditions", "-C", "--env-file"}),
}
#: Options dropped from the script's invocation: ours replace them (reporters, name filters), or
#: they would change which tests run or report (watch, bail, coverage thresholds, sharding).
_DROPPED_OPTIONS: dict[str, frozenset[str]] = {
    "jest": frozenset({"-t", "--testNamePattern", "--testPathPattern", "--json", "--outputFile", "--reporters",
                       "--watch", "--watchAll", "--bail", "-b", "--coverage", "--collectCoverage", "--ci",
                       "--verbose", "--silent", "--listTests", "--onlyChanged", "-o", "--changedSince", "--shard",
                       "--passWithNoTests", "--coverageDirectory", "--collectCoverageFrom", "--runTestsByPath",
                       "--detectOpenHandles", "--updateSnapshot", "-u", "--cacheDirectory"}),
    "vitest": frozenset({"-t", "--testNamePattern", "--reporter", "--outputFile", "--watch", "-w", "--ui", "--bail",
                         "--coverage", "--shard", "--passWithNoTests", "--run", "--silent", "--update", "-u"}),
    "mocha": frozenset({"-R", "--reporter", "-O", "--reporter-option", "--reporter-options", "-g", "--grep", "-f",
                        "--fgrep", "-w", "--watch", "-b", "--bail", "--spec", "-p", "--parallel", "-j", "--jobs",
                        "--forbid-only", "--forbid-pending", "-i", "--invert", "--recursive", "--watch-files",
                        "--dry-run", "-c", "--colors", "-C", "--no-colors"}),
    "jasmine": frozenset({"--reporter", "--filter", "--parallel", "--fail-fast", "--stop-on-failure", "--color",
                          "--no-color", "--verbose"}),
    "ava": frozenset({"-m", "--match", "--tap", "-t", "--verbose", "-v", "--watch", "-w", "--fail-fast",
                      "--update-snapshots", "-u", "--tap-reporter", "--reset-cache"}),
    "tape": frozenset(),
    "node": frozenset({"--test", "--test-reporter", "--test-reporter-destination", "--test-name-pattern",
                       "--test-skip-pattern", "--test-only", "--watch", "--test-shard", "--experimental-test-coverage"}),
}
#: Commands that wrap the runner (coverage tools, env setters) and are stepped over.
_WRAPPERS = {"nyc", "c8", "cross-env", "env", "npx", "dotenv", "istanbul", "ts-node", "node_modules/.bin/nyc"}


@dataclass(frozen=True)
class Invocation:
    """How the package's npm script starts the runner: environment and the options to keep."""

    script: str
    env: dict[str, str] = field(default_factory=dict)
    options: tuple[str, ...] = ()
    node_options: tuple[str, ...] = ()  # for `node --test`: node's own flags (--require, --import ...)
    paths: tuple[str, ...] = ()  # the test paths and globs the script gives (ours replace them in a run)

    @property
    def referenced_files(self) -> tuple[str, ...]:
        """Files named by ``--require``/``--import``/``--loader``/``--config``/``--file`` values."""
        names = []
        tokens = [*self.options, *self.node_options]
        for index, token in enumerate(tokens):
            option, equals, value = token.partition("=")
            if option in {"-r", "--require", "--import", "--loader", "--experimental-loader", "--config", "-c",
                          "--file", "--setupFiles", "--setupFilesAfterEnv"}:
                value = value if equals else tokens[index + 1] if index + 1 < len(tokens) else ""
                if value.startswith((".", "/")) or "/" in value:
                    names.append(value.removeprefix("./"))
        return tuple(names)


def script_invocation(package: Mapping[str, Any], runner: str) -> Invocation | None:
    """The first test script's call of ``runner``, its options kept or dropped per runner: kept
    are the ones that configure how tests load (``--require test/support/env``, ``--config``,
    ``--timeout``), dropped the ones our run replaces or that change which tests run (reporters,
    name patterns, watch, bail) and the test paths; its environment is the call's and the one the
    script is called with (dayjs: ``TZ=Pacific/Auckland npm run test-tz``, whose ``jest`` runs the
    timezone tests in Auckland first). None when no test script calls it."""
    pattern = _RUNNER_COMMAND[runner]
    package_scripts = scripts(package)
    seen: set[str] = set()

    def first_call(name: str, env: dict[str, str]) -> Invocation | None:
        """The script's first call of the runner in the order its segments run, into the scripts
        it calls with ``npm run``."""
        if name in seen or name not in package_scripts:
            return None
        seen.add(name)
        for segment in re.split(r"&&|\|\||;|\|", package_scripts[name]):
            if pattern.search(" " + segment):
                try:
                    invocation = _parse_segment(shlex.split(segment), runner, name)
                except ValueError:
                    invocation = None
                if invocation is not None:
                    return replace(invocation, env={**env, **invocation.env})
            for called in _NPM_RUN.finditer(segment):
                found = first_call(called.group(1), {**env, **_assignments(segment[:called.start()])})
                if found is not None:
                    return found
        return None

    for name, _ in _test_scripts(package_scripts):
        if (found := first_call(name, {})) is not None:
            return found
    return None


def _parse_segment(tokens: list[str], runner: str, script: str) -> Invocation | None:
    env: dict[str, str] = {}
    node_options: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        base = token.rsplit("/", 1)[-1]
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):
            name, _, value = token.partition("=")
            env[name] = value
        elif runner == "node" and base == "node":
            index += 1
            break
        elif base in {runner, f"_{runner}"} and runner != "node":
            index += 1
            break
        elif base in _WRAPPERS or token.startswith("-"):
            pass  # a wrapper, or a wrapper's option (nyc --reporter=lcov)
        index += 1
    else:
        return None
    values, dropped = _VALUE_OPTIONS[runner], _DROPPED_OPTIONS[runner]
    options: list[str] = []
    paths: list[str] = []
    while index < len(tokens):
        token = tokens[index]
        option, equals, _ = token.partition("=")
        takes_value = option in values and not equals
        if not token.startswith("-"):
            paths.append(token)  # a test path or glob: ours replace them
            index += 1
            continue
        if option.startswith("--no-") and option[5:] and f"--{option[5:]}" in dropped:
            option = f"--{option[5:]}"
        if option in dropped or (runner == "jest" and option.startswith("--coverage")):
            index += 2 if takes_value else 1
            continue
        kept = tokens[index:index + 2] if takes_value else [token]
        (node_options if runner == "node" else options).extend(kept)
        index += len(kept)
    return Invocation(script=script, env=env, options=tuple(options), node_options=tuple(node_options),
                      paths=tuple(paths))


#: Browser test runners, which no profile runs: their config files (whose ``files`` name the tests).
_BROWSER_CONFIGS = {
    "karma": ("karma.conf.js", "karma.conf.cjs", "karma.conf.ts", "karma.config.js", "karma.config.cjs"),
    "web-test-runner": ("web-test-runner.config.js", "web-test-runner.config.mjs", "wtr.config.js", "wtr.config.mjs"),
}
#: Where a runner looks for tests when nothing names them (mocha: ``./test``, not recursive).
_DEFAULT_TEST_PATHS = {"mocha": ("test/*.js", "test/*.cjs", "test/*.mjs")}


def _path_glob(pattern: str) -> re.Pattern[str]:
    """A test path argument (``test/unit/**/*.js``, ``test/unit``, ``test/{a,b}.js``) as a regex
    that a file under it matches (a folder's files at any depth)."""
    regex = ""
    for part in re.split(r"(\*\*/|\*\*|\*|\?|\{[^{}]*\})", pattern.removeprefix("./").rstrip("/")):
        if part.startswith("{") and part.endswith("}"):
            regex += "(?:" + "|".join(re.escape(one) for one in part[1:-1].split(",")) + ")"
        else:
            regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part))
    return re.compile(regex + ("" if _GLOB.search(pattern) else "(?:/.*)?"))


_GLOB = re.compile(r"[*?{]")


def matches_paths(patterns: Sequence[str], path: str) -> bool:
    """Whether ``path`` falls under one of the test path arguments or globs ``patterns``."""
    return any(_path_glob(pattern).fullmatch(path) for pattern in patterns)


def browser_only_reason(files: ProjectFiles | Mapping[str, str], runner: str, test_files: Sequence[str],
                        directory: str = "", runner_paths: Sequence[str] = ()) -> str | None:
    """Why a change's tests cannot be run, when they are a browser runner's only: a karma or
    web-test-runner config whose ``files`` take every one of ``test_files`` (the PR's, relative to
    the repository), none of which falls in the paths ``runner`` runs (its test script's paths,
    ``runner_paths`` from its config, else its default: mocha's ``test/*.js``). axios 2019-2022:
    ``grunt test`` runs karma over ``test/specs/**/*.spec.js`` and mocha over ``test/unit``. None
    when the files are ``runner``'s or there is no telling (no browser config; a runner whose
    default takes any file)."""
    files = ProjectFiles.of(files)
    local = [path.removeprefix(f"{directory}/") if directory else path for path in test_files]
    if not local:
        return None
    for browser, names in _BROWSER_CONFIGS.items():
        config = next((join(directory, name) for name in names if files.read(join(directory, name)) is not None), None)
        if config is None:
            continue
        browser_globs = re.findall(r"""['"`]([^'"`\s]*[*][^'"`\s]*)['"`]""", files.read(config) or "")
        if not browser_globs or not all(matches_paths(browser_globs, path) for path in local):
            continue
        invocation = script_invocation(files.package_json(directory), runner)
        own = (invocation.paths if invocation and invocation.paths else tuple(runner_paths)
               or _DEFAULT_TEST_PATHS.get(runner, ()))
        if not own or any(matches_paths(own, path) for path in local):
            return None
        return (f"the change's tests ({', '.join(sorted(test_files)[:3])}) are {config}'s, a browser runner "
                f"({browser}) no profile runs; {runner} runs {' '.join(own)}")
    return None


# --- running ids ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """One report a run writes: its path in the container, its format, and the one test file it
    covers (None: every file of the run)."""

    path: str
    format: str  # "jest-json", "mocha-json", "jasmine-json", "node-tap", "ava-tap", "tape-tap"
    file: str | None = None


@dataclass(frozen=True)
class RunPlan:
    """A shell command (``sh -c``) that runs the requested ids, and the reports it leaves."""

    runner: str
    command: str
    reports: tuple[Report, ...]
    test_ids: tuple[str, ...]
    #: Whether the command streams every outcome live to the grading's collector (each report's
    #: outcomes again, as :func:`streamed_reports` reads them back).
    outcome_stream: bool = False


def js_regex_escape(text: str) -> str:
    """``text`` as a JavaScript regular expression that matches it literally (no ``u`` flag)."""
    return re.sub(r"[\\^$.*+?()[\]{}|/]", lambda match: "\\" + match.group(0), text)


def _name_pattern(full_names: Sequence[str], *, anchored_start: bool = True) -> str:
    alternatives = "|".join(js_regex_escape(name) for name in dict.fromkeys(full_names))
    # " *": vitest 1 names a file's top-level tests after the file's unnamed suite (" title").
    return f"^ *(?:{alternatives})$" if anchored_start else f"(?:^| )(?:{alternatives})$"


def _group(test_ids: Sequence[str]) -> tuple[list[str], dict[str, list[tuple[str, ...]]]]:
    """Files requested whole, and the title paths requested per other file (first-seen order)."""
    whole: list[str] = []
    titled: dict[str, list[tuple[str, ...]]] = {}
    for one in test_ids:
        file, titles = split_test_id(one)
        if not titles:
            if file not in whole:
                whole.append(file)
        else:
            titled.setdefault(file, []).append(titles)
    return whole, {file: titles for file, titles in titled.items() if file not in whole}


def package_folder(root: str, directory: str) -> str:
    """The folder of the package ``directory`` (relative to ``root``; empty: the root itself), where
    its runner runs."""
    return f"{root.rstrip('/')}/{directory.strip('/')}" if directory.strip("/") else root


def plan_run(runner: str, test_ids: Sequence[str], report_dir: str, *, root: str = "/testbed",
             directory: str = "", invocation: Invocation | None = None,
             mocha_reporter: str = MOCHA_REPORTER_PATH, jasmine_reporter: str = JASMINE_REPORTER_PATH,
             jest_reporter: str = JEST_REPORTER_PATH, vitest_reporter: str = VITEST_REPORTER_PATH,
             node_reporter: str = NODE_REPORTER_PATH, tape_stream: str = TAPE_STREAM_PATH,
             random_seed: int | None = None, outcome_fifo: str | None = None) -> RunPlan:
    """The command that runs exactly ``test_ids`` (repository-relative ids) under ``runner`` in the
    package ``directory`` (relative to ``root``), writing reports under ``report_dir``. The
    script's environment and kept options come from ``invocation``. ``random_seed`` (at least 1)
    seeds V8's ``Math.random`` where the runner passes a V8 flag on to the tests' process (mocha's
    ``--v8-random-seed``, ``node --random-seed``); other runners ignore it. ``outcome_fifo`` (a
    grading's collector FIFO): for a runner of :data:`STREAM_RUNNERS` the command opens it first,
    as descriptor :data:`OUTCOME_FD`, and each runner process's reporters stream its outcomes there
    (``outcome_stream`` then)."""
    if runner not in RUNNERS:
        raise ValueError(f"unknown JavaScript test runner {runner!r}; known: {', '.join(RUNNERS)}")
    invocation = invocation or Invocation(script="")
    cwd = package_folder(root, directory)
    prefix = f"{directory.strip('/')}/" if directory.strip("/") else ""

    def local(file: str) -> str:
        return file.removeprefix(prefix) if prefix and file.startswith(prefix) else file

    head = f"cd {shlex.quote(cwd)} && mkdir -p {shlex.quote(report_dir)} && {_environment(cwd, root, invocation.env)}"
    streaming = outcome_fifo is not None and runner in STREAM_RUNNERS
    if streaming:
        # Opened before anything else runs: the collector removes the FIFO's name once a writer has
        # it, and every runner process of the plan inherits the one descriptor.
        head = f"exec {OUTCOME_FD}>{shlex.quote(outcome_fifo)} && {head}"

    def stream_to(report: str) -> str:
        """The variables that make one runner process's reporters stream, as ``report``'s outcomes."""
        return f"REPO2ENV_OUTCOME_FD={OUTCOME_FD} REPO2ENV_OUTCOME_REPORT={shlex.quote(report)} " if streaming else ""
    options = " ".join(shlex.quote(option) for option in invocation.options)
    whole, titled = _group(test_ids)
    commands: list[str] = []
    reports: list[Report] = []

    def quoted(files: Sequence[str]) -> str:
        return " ".join(shlex.quote(local(file)) for file in files)

    if runner in ("jest", "vitest"):
        batches = [(whole, None)] if whole else []
        if titled:
            names = [" ".join(titles) for file_titles in titled.values() for titles in file_titles]
            batches.append((list(titled), _name_pattern(names)))
        for number, (batch, pattern) in enumerate(batches):
            report = f"{report_dir}/{runner}-{number}.json"
            name_filter = f" -t {shlex.quote(pattern)}" if pattern else ""
            if runner == "jest":
                reporters = f"--reporters=default --reporters={shlex.quote(jest_reporter)} " if streaming else ""
                commands.append(f"{stream_to(report)}jest --ci --json --outputFile={shlex.quote(report)} {reporters}"
                                f"{_JEST_FIXED} {options}{name_filter} --runTestsByPath {quoted(batch)}")
            else:
                reporters = f"--reporter={shlex.quote(vitest_reporter)} " if streaming else ""
                commands.append(f"{stream_to(report)}vitest run {reporters}--reporter=json --outputFile={shlex.quote(report)} "
                                f"{options}{name_filter} {quoted(batch)}")
            reports.append(Report(report, "jest-json"))
    else:
        for number, file in enumerate([*whole, *titled]):
            titles = titled.get(file)
            if runner == "mocha":
                report = f"{report_dir}/mocha-{number}.json"
                grep = f" --grep {shlex.quote(_name_pattern([' '.join(t) for t in titles]))}" if titles else ""
                # --reporter-options (plural) is the spelling every mocha since 2 accepts; the
                # variable serves mochas that pass reporters no options.
                # mocha 4+ waits for the handles the tests left open (a server, a socket) after its
                # end; the project's own harness often exits for it (grunt, --exit in the script).
                exits = "" if {"--exit", "--no-exit"} & set(invocation.options) else f"{_MOCHA_EXIT} "
                # _mocha under node, as bin/mocha starts it: bin/mocha runs the tests in a child
                # _mocha (always before mocha 7; since, when a node flag is given), and Node marks
                # the descriptors it inherits close-on-exec as it starts, so that child would have
                # no stream. Every run does the same (derivation's too), node taking the node and V8
                # flags (the seed: V8's --random-seed, which bin/mocha's --v8-random-seed gave).
                flags = [_node_flag(option) for option in invocation.options if _NODE_FLAG.match(option)]
                flags += [f"--random-seed={random_seed}"] if random_seed else []
                program = " ".join(["node", *map(shlex.quote, flags), '"$(command -v _mocha)"'])
                kept = " ".join(shlex.quote(option) for option in invocation.options if not _NODE_FLAG.match(option))
                commands.append(f"{stream_to(report)}REPO2ENV_MOCHA_REPORT={shlex.quote(report)} {program} {exits}"
                                f"--reporter {shlex.quote(mocha_reporter)} --reporter-options output={shlex.quote(report)} "
                                f"{kept}{grep} {quoted([file])}")
                reports.append(Report(report, "mocha-json", file))
            elif runner == "jasmine":
                report = f"{report_dir}/jasmine-{number}.json"
                name_filter = (f" --filter={shlex.quote(_name_pattern([' '.join(t) for t in titles]))}"
                               if titles else "")
                commands.append(f"{stream_to(report)}REPO2ENV_JASMINE_REPORT={shlex.quote(report)} jasmine {options} "
                                f"--reporter={shlex.quote(jasmine_reporter)}{name_filter} {quoted([file])}")
                reports.append(Report(report, "jasmine-json", file))
            elif runner == "ava":
                report = f"{report_dir}/ava-{number}.tap"
                match = "".join(f" --match {shlex.quote(_ava_match(t[-1]))}" for t in dict.fromkeys(titles or ()))
                # ava ends a run after 10 s without news from its workers: a loaded machine's worker
                # start-up alone can take that. Unless the project sets its own, a longer one.
                timeout = "" if any(option.split("=")[0] in ("-T", "--timeout") for option in invocation.options) \
                    else " --timeout=2m"
                commands.append(f"ava --tap{timeout} {options}{match} {quoted([file])} > {shlex.quote(report)} "
                                f"2> {shlex.quote(report)}.stderr")
                reports.append(Report(report, "ava-tap", file))
            elif runner == "tape":
                report = f"{report_dir}/tape-{number}.tap"
                # Streaming, tape_stream.js starts the tape the package resolves, as `tape` would.
                tape = f"node {shlex.quote(tape_stream)}" if streaming else "tape"
                commands.append(f"{stream_to(report)}{tape} {options} {quoted([file])} > {shlex.quote(report)} "
                                f"2> {shlex.quote(report)}.stderr")
                reports.append(Report(report, "tape-tap", file))
            else:
                report = f"{report_dir}/node-{number}.tap"
                node_options = " ".join(shlex.quote(option) for option in invocation.node_options)
                pattern = (f" --test-name-pattern={shlex.quote(_name_pattern([t[-1] for t in titles], anchored_start=False))}"
                           if titles else "")
                seeded = f"--random-seed={random_seed} " if random_seed else ""
                reporters = (f" --test-reporter={shlex.quote(node_reporter)} --test-reporter-destination=stdout"
                             if streaming else "")
                # The stream's module is preloaded before the script's own preloads, which run in the
                # runner's process too, before its reporters load: they never see its variables.
                # (The test files' processes preload it as well, with nothing to take.)
                preloaded = f"--require {shlex.quote(OUTCOME_STREAM_PATH)} " if streaming else ""
                commands.append(f"{stream_to(report)}node {seeded}{preloaded}{node_options} --test --test-reporter=tap "
                                f"--test-reporter-destination={shlex.quote(report)}{reporters}{pattern} {quoted([file])}")
                reports.append(Report(report, "node-tap", file))
    # Every command runs whatever the previous one gave: the reports, not exit codes, tell outcomes.
    body = "; ".join(f"({command})" for command in commands) or "true"
    return RunPlan(runner=runner, command=f"{head}; {body}; exit 0", reports=tuple(reports), test_ids=tuple(test_ids),
                   outcome_stream=streaming)


def cache_warmup_command(runner: str, *, root: str = "/testbed", directory: str = "",
                         invocation: Invocation | None = None) -> str | None:
    """The shell command a task image runs once at build time, as the agent, to fill the runner's
    transform cache for the base commit's whole suite; None when the runner keeps none between runs.

    jest transforms every file it loads (babel, ts-jest) and keeps the result in its cache folder,
    keyed by the file, the project's configuration and that folder: a grading in a fresh sandbox
    spends most of a small suite's time transforming again (dayjs: 4.1 s of jest cold, 1.65 s warm).
    The warm-up runs every test file of the configuration with the plan's options and a name that
    no test has, so each file and what it imports is transformed and no test runs. Only the base
    commit's files, which the agent sees anyway, are in it; a grading's hidden tests are new files."""
    if runner != "jest":
        return None
    invocation = invocation or Invocation(script="")
    cwd = package_folder(root, directory)
    options = " ".join(shlex.quote(option) for option in invocation.options)
    return (f"cd {shlex.quote(cwd)} && {_environment(cwd, root, invocation.env)} && "
            f"jest --ci {_JEST_FIXED} {options} -t {shlex.quote(_NO_TEST_NAME)}")


#: ``--exit`` for a mocha that knows it (4 and later; before 4, mocha exited at its end anyway and
#: refuses the option): asked of the mocha the package resolves, when the command runs.
#: The options of a mocha command line that bin/mocha hands to node (Node's and V8's flags; a
#: ``--v8-`` prefix says it is V8's), not to _mocha.
_NODE_FLAG = re.compile(r"--(?:v8-|expose[-_]gc|max[-_]old[-_]space[-_]size|inspect|harmony|experimental-|"
                        r"no-warnings|no-deprecation|throw-deprecation|trace-|unhandled-rejections|enable-source-maps|"
                        r"stack-size|stack-trace-limit|preserve-symlinks|abort-on-uncaught-exception|conditions|"
                        r"loader|import=|es-staging|use-strict|frozen-intrinsics|icu-data-dir|openssl-|tls-)")


def _node_flag(option: str) -> str:
    """``option`` as node takes it (``--v8-random-seed=1`` -> ``--random-seed=1``)."""
    return "--" + option.removeprefix("--v8-") if option.startswith("--v8-") else option


_MOCHA_EXIT = ("$(node -e \"try { if (+require('mocha/package.json').version.split('.')[0] >= 4) "
               "process.stdout.write('--exit') } catch (error) {}\" 2>/dev/null)")


def _environment(cwd: str, root: str, env: Mapping[str, str]) -> str:
    """The ``export`` that every run of a runner starts with: the package's and the root's installed
    tools first on PATH, no colours, CI mode (no watch, no prompt), and ``env``."""
    extra = " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items())
    return (f"export PATH={shlex.quote(cwd)}/node_modules/.bin:{shlex.quote(root)}/node_modules/.bin:\"$PATH\""
            f" CI=true FORCE_COLOR=0 NO_COLOR=1{' ' + extra if extra else ''}")


#: How the agent's run of the visible tests starts each runner: its own output for a person to read,
#: stopping at the first failure where the runner can (vitest's --bail is younger than some pins).
_VISIBLE_TESTS = {"jest": f"jest --ci --bail {_JEST_FIXED}", "vitest": "vitest run",
                  "mocha": "mocha --bail", "jasmine": "jasmine --stop-on-failure=true", "ava": "ava --fail-fast",
                  "tape": "tape", "node": "node --test"}


def visible_tests_command(runner: str, *, root: str = "/testbed", directory: str = "") -> str:
    """The shell command that runs the visible tests with ``runner`` in the package ``directory`` (as
    the grader's plan does, from the same folder and PATH), the targets to be appended as absolute
    paths; with none, the runner's own default (its configuration's test files)."""
    if runner not in RUNNERS:
        raise ValueError(f"unknown JavaScript test runner {runner!r}; known: {', '.join(RUNNERS)}")
    cwd = package_folder(root, directory)
    return f"cd {shlex.quote(cwd)} && {_environment(cwd, root, {})} && {_VISIBLE_TESTS[runner]}"


def _ava_match(title: str) -> str:
    # A leading "!" negates an ava match pattern; "*" matches any text, the literal "*" included.
    return f"*{title}" if title.startswith("!") else title


_PARSERS: dict[str, Callable[..., dict[str, TestStatus]]] = {
    "jest-json": parse_jest_json, "mocha-json": parse_mocha_json, "jasmine-json": parse_jasmine_json,
    "node-tap": parse_node_tap,
    "ava-tap": parse_ava_tap, "tape-tap": parse_tape_tap,
    "node-stream": parse_node_stream, "tape-stream": parse_tape_stream,
}


#: Formats of a report that covers one test file and does not name it (the parser is told which).
_PER_FILE_FORMATS = frozenset({"node-tap", "ava-tap", "tape-tap", "jasmine-json", "node-stream", "tape-stream"})


def reported_outcomes(plan: RunPlan, read_report: Callable[[str], str | None], *,
                      root: str = "/testbed") -> dict[str, TestStatus]:
    """Every outcome ``plan``'s reports name, requested or not (``read_report(path)`` gives a
    report's text, None when it was not written). A per-file report that is missing or not what
    the runner writes makes its file ``ERROR``; a missing report of several files names nothing."""
    reported: dict[str, TestStatus] = {}
    for report in plan.reports:
        text = read_report(report.path)
        try:
            if text is None:
                raise ReportError(f"{report.path} was not written")
            parser = _PARSERS[report.format]
            parsed = parser(text, report.file, root) if report.format in _PER_FILE_FORMATS else parser(text, root)
        except ReportError:
            if report.file is not None:
                reported[test_id(report.file)] = TestStatus.ERROR
            continue
        for key, status in parsed.items():
            keep_worse(reported, key, status)  # the same id in two reports (a file run twice)
    return reported


#: The lists each report format's entries go in, and its top-level fields a stream's end may give.
_STREAM_LISTS = {"mocha-json": ("tests", "hooks"), "jasmine-json": ("tests",), "jest-json": ("testResults",),
                 "node-tap": ("tests",), "tape-tap": ("tests",)}
_STREAM_FIELDS = {"mocha-json": ("runner", "complete"), "jasmine-json": ("runner", "global_errors", "complete"),
                  "jest-json": ("runner",), "node-tap": ("runner", "complete"), "tape-tap": ("runner", "complete")}
#: The format a report's stream is given in, where it is not the report's own: a TAP report's stream
#: is JSON (its entries, what the report's lines are made of; see reports.py).
_STREAM_FORMATS = {"node-tap": "node-stream", "tape-tap": "tape-stream"}


def streamed_reports(plan: RunPlan, stream_text: str) -> dict[str, list[str] | None]:
    """Each report of ``plan`` as the live outcome stream (``outcome_stream.js``'s lines) gave it:
    by path, the report's text (for a TAP report, JSON: the entries its lines are made of, in the
    ``node-stream`` or ``tape-stream`` format of reports.py) once per entry the stream sent for it
    (each entry alone with the report's end fields, so that :func:`reported_outcomes` can keep an id's worse outcome, as it
    does across reports: an entry a test's code adds to the stream cannot hide a real failure), or
    None when the stream never ended that report (its runner process did not end its run). Lines
    that are not the module's records, or name no report of the plan, are ignored."""
    formats = {report.path: report.format for report in plan.reports}
    entries: dict[str, list[tuple[str, object]]] = {path: [] for path in formats}
    ends: dict[str, dict] = {}
    for line in stream_text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("report") not in formats:
            continue
        path, kind = record["report"], record.get("kind")
        if kind == "entry" and record.get("list") in _STREAM_LISTS.get(formats[path], ()):
            entries[path].append((record["list"], record.get("entry")))
        elif kind == "end" and isinstance(record.get("fields"), dict):
            fields = {name: value for name, value in record["fields"].items() if name in _STREAM_FIELDS[formats[path]]}
            ends.setdefault(path, {}).update(fields)
    texts: dict[str, list[str] | None] = {}
    for path, report_format in formats.items():
        if path not in ends or report_format not in _STREAM_LISTS:
            texts[path] = None
            continue
        empty = {name: [] for name in _STREAM_LISTS[report_format]}
        texts[path] = [json.dumps({**empty, **ends[path]})] + [
            json.dumps({**empty, **ends[path], name: [entry]}) for name, entry in entries[path]]
    return texts


def streamed_outcomes(plan: RunPlan, stream_text: str, *, root: str = "/testbed") -> dict[str, TestStatus]:
    """The outcome of each id of ``plan`` as the live outcome stream gave it (:func:`streamed_reports`
    read as :func:`read_outcomes` reads the reports: a report the stream never ended is one not written)."""
    texts = streamed_reports(plan, stream_text)
    reported: dict[str, TestStatus] = {}
    for report in plan.reports:
        pieces = texts.get(report.path)
        streamed = Report(report.path, _STREAM_FORMATS.get(report.format, report.format), report.file)
        single = RunPlan(runner=plan.runner, command="", reports=(streamed,), test_ids=())
        for piece in pieces if pieces is not None else [None]:
            for key, status in reported_outcomes(single, lambda _path, piece=piece: piece, root=root).items():
                reported[key] = status if key not in reported or status != TestStatus.PASSED else reported[key]
    return requested_outcomes(plan.test_ids, reported)


def read_outcomes(plan: RunPlan, read_report: Callable[[str], str | None], *,
                  root: str = "/testbed") -> dict[str, TestStatus]:
    """The outcome of each id of ``plan`` (:func:`reported_outcomes`, then
    :func:`~.reports.requested_outcomes`: ``MISSING`` for an id no report names, ``ERROR`` for
    one whose file failed to load)."""
    return requested_outcomes(plan.test_ids, reported_outcomes(plan, read_report, root=root))
