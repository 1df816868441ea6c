"""Which paths of a JavaScript/TypeScript repository are tests, auxiliary files or source.

How a path is classified (:meth:`JavaScriptPaths.classify`), first rule that matches wins:

1. **test** -- anything under a test tree: the folders the Python profile calls test trees
   (``test/``, ``tests/``, ``__tests__/``, ``test-utils/``, ``e2e_tests/`` ... at any depth) and
   JavaScript's own: ``spec/``, ``specs/``, ``__mocks__/``, ``__fixtures__/``, ``__snapshots__/``;
   the folders the repository's runner configuration names as its tests at the commit (jest's
   ``roots``/``testMatch``, mocha's ``spec`` and ``mocha.opts``, ava's ``files``, the paths the
   ``test`` script passes its runner); a file named ``*.test.*``/``*.spec.*`` (any JavaScript or
   TypeScript suffix), ``*.test-d.ts`` (tsd's type tests), or ``test.js``/``tests.js`` (and their
   ``.mjs``/``.cjs``/``.ts`` spellings) at the top level, as tape and ava projects write them; the
   runners' configuration and setup files (:data:`TEST_CONFIG_PATTERNS`: ``jest.config.*``,
   ``vitest.config.*``, ``.mocharc*``, ``ava.config.*``, ``setupTests.*`` ...), because the grader
   restores them before adding the PR's tests, so a change to them must travel with the tests.
2. **aux** -- prose and changelogs by the shared rules (``*.md``, ``docs/``, ``CHANGELOG*`` ...);
   a code file only under ``docs/``/``doc/`` (a documentation site's components, which no test
   imports; unlike Python's ``docs/conf.py`` rule), never under a changelog folder (``news/``
   may be an app's own code).
3. **source** -- everything else: the code, ``package.json``, lock files, ``tsconfig.json``,
   bundler configuration.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

import yaml

from repo2env.languages.base import PathKind, PathRules
from repo2env.languages.conventions import DOCS_DIR, TEST_DIR, is_aux, split_path
from repo2env.languages.files import RepoFiles

#: Suffixes of JavaScript and TypeScript code (and the component formats their test runners
#: transform: Vue and Svelte single-file components).
JAVASCRIPT_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts", ".vue", ".svelte")
_CODE = r"(?:[cm]?[jt]sx?)"
_JS_TEST_DIR = re.compile(r"(?:^|/)(?:specs?|__mocks__|__fixtures__|__snapshots__)/", re.IGNORECASE)
_JS_TEST_FILE = re.compile(rf"[^/]+\.(?:test|spec)\.{_CODE}|[^/]+\.test-d\.ts|[^/]+\.(?:test|spec)\.snap")
#: tsd's type tests, declaration files, and Flow's: chalk's ``test/_flow.js`` (``// $ExpectError``
#: lines ``flow check`` reads; ava skips a file named with ``_``), ``*.flow.js``, ``*.js.flow``.
_TYPE_TEST_FILE = re.compile(r"[^/]+\.test-d\.[cm]?tsx?|[^/]+\.d\.[cm]?ts|_flow\.[cm]?jsx?|[^/]+\.flow\.[cm]?jsx?|"
                             r"[^/]+\.[cm]?jsx?\.flow")
_TYPE_TEST_DIR = re.compile(r"(?:^|/)(?:types|type-tests|typings|dts)/")
_TOP_LEVEL_TEST_FILE = re.compile(rf"tests?\.{_CODE}")
#: Files that configure or set up a runner's tests and hold none (fnmatch, on the file name).
TEST_CONFIG_PATTERNS = (
    "jest.config.*", "jest.setup*", "jest-setup*", "jest.preset.*", "setupTests.*", "vitest.config.*",
    "vitest.workspace.*", "vitest.projects.*", "vitest.setup*", ".mocharc*", "mocha.opts", "ava.config.*",
    "karma.conf.*", ".taprc", ".nycrc*", ".c8rc*", "playwright.config.*", "cypress.config.*",
)
_TEST_CONFIG = re.compile("|".join(fnmatch.translate(pattern) for pattern in TEST_CONFIG_PATTERNS))
#: Top-level folders a loosely written runner pattern (``ava src/**``) must not turn into a test tree.
_SOURCE_ROOTS = frozenset({"src", "lib", "source", "app", "packages", "dist", "build", "es", "esm", "cjs"})
_GLOB_CHARS = re.compile(r"[*?[{(!+@]")
# What may follow a folder in a runner pattern for the whole folder to be tests: any file, or any
# file with a code suffix (``test-unit/**/*.js``, ``checks/*.{js,ts}``).
_ANY_FILE = re.compile(r"(?:\*\*/)*(?:\*\*|\*(?:\.(?:\{[\w,]+\}|\w+))?)?")
#: The runner configuration files whose test folders are read (first found of each kind).
_JEST_CONFIGS = ("jest.config.js", "jest.config.cjs", "jest.config.mjs", "jest.config.ts", "jest.config.json")
_MOCHA_CONFIGS = (".mocharc.json", ".mocharc.jsonc", ".mocharc.yml", ".mocharc.yaml", ".mocharc.js", ".mocharc.cjs")
_AVA_CONFIGS = ("ava.config.js", "ava.config.cjs", "ava.config.mjs")
#: Runner sub-commands, which a ``test`` script's words may be rather than paths.
_SUBCOMMANDS = frozenset({"run", "watch", "bench", "related", "dev", "list", "typecheck", "init", "test", "exec"})
#: The programs that take test paths (as the first word of a ``test`` script, or after a wrapper such
#: as ``nyc`` or ``cross-env``, whose own options are not paths).
_RUNNERS = re.compile(r"(?:^|/)(?:jest|vitest|_?mocha|ava|tape|tap|node|ts-node|tsx|babel-node)$")


@dataclass(frozen=True)
class JavaScriptPaths(PathRules):
    """The JavaScript profile's path rules; ``test_dirs`` are the folders (relative to the root, no
    trailing ``/``) and ``test_files`` the single files that the repository's runner configuration
    names as its tests."""

    test_dirs: tuple[str, ...] = ()
    test_files: tuple[str, ...] = ()
    code_suffixes = JAVASCRIPT_SUFFIXES

    def classify(self, path: str) -> PathKind:
        directory, name, extension = split_path(path)
        path = directory + name
        if (TEST_DIR.search(directory) or _JS_TEST_DIR.search(directory) or _JS_TEST_FILE.fullmatch(name)
                or (not directory and _TOP_LEVEL_TEST_FILE.fullmatch(name)) or _TEST_CONFIG.match(name)
                or path in self.test_files or any(path.startswith(f"{folder}/") for folder in self.test_dirs)):
            return "test"
        if path.endswith(JAVASCRIPT_SUFFIXES):
            return "aux" if DOCS_DIR.search(directory) else "source"
        return "aux" if is_aux(directory, name, extension) else "source"

    def is_test_config(self, path: str) -> bool:
        return bool(_TEST_CONFIG.match(path.rpartition("/")[2]))

    def is_type_test(self, path: str) -> bool:
        """tsd's ``*.test-d.ts``, a declaration file or a Flow type test in a test tree, or TypeScript in a test tree's ``types``,
        ``type-tests``, ``typings`` or ``dts`` folder that is not named as a runner's test
        (marked's ``test/types/marked.ts``, which ``tsc`` compiles)."""
        directory, _, name = path.rpartition("/")
        if self.classify(path) != "test":
            return False
        return bool(_TYPE_TEST_FILE.fullmatch(name)) or (
            name.endswith((".ts", ".tsx", ".mts", ".cts")) and not _JS_TEST_FILE.fullmatch(name)
            and _TYPE_TEST_DIR.search(f"{directory}/") is not None)

    def test_pattern(self) -> str:
        named = "|".join([*(re.escape(folder) + "/" for folder in self.test_dirs),
                          *(re.escape(file) + r"\Z" for file in self.test_files)])
        patterns = [
            rf"(?i:{TEST_DIR.pattern})", rf"(?i:{_JS_TEST_DIR.pattern})",
            rf"(?:^|/)(?:{_JS_TEST_FILE.pattern})\Z", rf"^(?:{_TOP_LEVEL_TEST_FILE.pattern})\Z",
            "(?:^|/)(?:" + "|".join(fnmatch.translate(one).removeprefix("(?s:").removesuffix(")\\Z")
                                    for one in TEST_CONFIG_PATTERNS) + r")\Z",
        ]
        if named:
            patterns.append(rf"^(?:{named})")
        return "|".join(patterns)


JAVASCRIPT_PATHS = JavaScriptPaths()


def javascript_paths(files: RepoFiles | None) -> JavaScriptPaths:
    """The rules for a repository at one commit: the conventions, plus the test folders and files
    its runner configuration names (read from ``files``; none without them)."""
    if files is None:
        return JAVASCRIPT_PATHS
    folders: list[str] = []
    singles: list[str] = []
    for pattern in named_test_patterns(files):
        folder, single = _test_location(pattern)
        if folder:
            folders.append(folder)
        elif single:
            singles.append(single)
    if not folders and not singles:
        return JAVASCRIPT_PATHS
    return JavaScriptPaths(tuple(dict.fromkeys(folders)), tuple(dict.fromkeys(singles)))


def is_test_file(path: str) -> bool:
    """Whether ``path`` holds tests a runner runs (not a runner's configuration, a type test, a
    mock, a fixture or a helper)."""
    rules = JAVASCRIPT_PATHS
    return (rules.classify(path) == "test" and rules.is_code(path) and not rules.is_test_config(path)
            and not rules.is_type_test(path)
            and not any(part in ("__mocks__", "__fixtures__", "fixtures", "helpers", "support", "__snapshots__")
                        for part in path.split("/")[:-1]))


def named_test_patterns(files: RepoFiles) -> list[str]:
    """Every path or glob the runner configuration at the root names as tests."""
    package = _json_object(files.read("package.json"))
    named: list[str] = []
    jest = package.get("jest")
    if isinstance(jest, dict):
        named += _strings(jest.get("roots")) + _strings(jest.get("testMatch"))
    for key in ("mocha", "ava"):
        section = package.get(key)
        if isinstance(section, dict):
            named += _strings(section.get("spec" if key == "mocha" else "files"))
    for path in _JEST_CONFIGS:
        if (text := files.read(path)) is not None:
            named += _config_strings(path, text, ("roots", "testMatch"))
            break
    for path in _MOCHA_CONFIGS:
        if (text := files.read(path)) is not None:
            named += _config_strings(path, text, ("spec",))
            break
    for path in _AVA_CONFIGS:
        if (text := files.read(path)) is not None:
            named += _config_strings(path, text, ("files",))
            break
    opts = files.read("test/mocha.opts")
    if opts:
        named += [line.strip() for line in opts.splitlines() if line.strip() and not line.strip().startswith("-")]
    scripts = package.get("scripts")
    if isinstance(scripts, dict):
        named += _script_paths(scripts)
    return named


def runner_test_patterns(files: RepoFiles, runner: str) -> list[str]:
    """The paths and globs ``runner``'s own configuration at the root names as its tests (mocha:
    package.json's ``mocha.spec``, ``.mocharc*``'s ``spec``, ``test/mocha.opts``; ava: ``files``);
    empty when it names none or the runner has no such setting read here."""
    if runner not in {"mocha", "ava"}:
        return []
    section = _json_object(files.read("package.json")).get(runner)
    named = _strings(section.get("spec" if runner == "mocha" else "files")) if isinstance(section, dict) else []
    for path in _MOCHA_CONFIGS if runner == "mocha" else _AVA_CONFIGS:
        if (text := files.read(path)) is not None:
            named += _config_strings(path, text, ("spec",) if runner == "mocha" else ("files",))
            break
    if runner == "mocha" and (opts := files.read("test/mocha.opts")):
        named += [line.strip() for line in opts.splitlines() if line.strip() and not line.strip().startswith("-")]
    return named


def _script_paths(scripts: dict) -> list[str]:
    """The paths the ``test`` script (and the ``test:*`` scripts) give their runner: the words after
    the runner that are not options, nor the value of an option (a bare word right after one)."""
    found: list[str] = []
    for name, command in scripts.items():
        if not isinstance(command, str) or not re.fullmatch(r"test(?:[:_-][\w:.-]*)?", str(name)):
            continue
        for part in re.split(r"&&|\|\||;|\|", command):
            try:
                tokens = shlex.split(part)
            except ValueError:
                continue
            start = next((index for index, token in enumerate(tokens) if _RUNNERS.search(token)), None)
            if start is None:
                continue
            previous = ""
            for token in tokens[start + 1:]:
                bare = re.fullmatch(r"[\w.-]+", token) is not None
                if (not token.startswith(("-", "@")) and "=" not in token and token not in _SUBCOMMANDS
                        and ("/" in token or token.endswith(JAVASCRIPT_SUFFIXES)
                             or (bare and not previous.startswith("-")))):
                    found.append(token)
                previous = token
    return found


def _test_location(pattern: str) -> tuple[str | None, str | None]:
    """(folder, None) when ``pattern`` names a whole folder of tests, (None, file) when it names one
    file, (None, None) otherwise (a file-name pattern such as ``**/*.unit.js`` names no folder)."""
    text = pattern.strip().removeprefix("<rootDir>/").removeprefix("./").rstrip("/")
    if not text or text.startswith(("/", "..", "!")) or "<" in text:
        return None, None
    glob = _GLOB_CHARS.search(text)
    if glob is None:
        if text.endswith(JAVASCRIPT_SUFFIXES):
            return None, text
        folder = text
    else:
        folder = text[:glob.start()].rpartition("/")[0]
        if not folder or not _ANY_FILE.fullmatch(text[len(folder) + 1:]):
            return None, None
    if folder.split("/")[0].lower() in _SOURCE_ROOTS and folder.count("/") == 0:
        return None, None
    return folder, None


def _config_strings(path: str, text: str, keys: Iterable[str]) -> list[str]:
    """The strings (or lists of strings) ``keys`` hold in a JSON, YAML or JavaScript config file;
    JavaScript is read for literal ``key: 'x'`` / ``key: ['x', 'y']`` entries only."""
    if path.endswith((".json", ".jsonc", ".yml", ".yaml")):
        document = _json_object(text) if path.endswith(".json") else _yaml_object(text)
        return [value for key in keys for value in _strings(document.get(key))]
    found: list[str] = []
    for key in keys:
        for match in re.finditer(rf"\b{key}\s*:\s*(\[[^\]]*\]|'[^']*'|\"[^\"]*\"|`[^`$]*`)", text):
            found += re.findall(r"""['"`]([^'"`]+)['"`]""", match.group(1))
    return found


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def _json_object(text: str | None) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _yaml_object(text: str) -> dict:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return value if isinstance(value, dict) else {}
