"""The test files that turn a change's test data into tests.

Some projects keep most tests as data: marked's are Markdown inputs with the HTML they must give
(``test/specs/new/list_code_header.md`` and ``.html``), and one test file (``test/specs/run-spec.js``,
later ``test/run-spec-tests.js``) makes a test of each pair it reads from ``./new``. Half of
marked's merged PRs with tests change only such data, so the files to run for them are not in
the change at all: they are the test files that read the data's folder.

:func:`tests_reading_data` finds them without running anything: from each data file's folder up,
the first folder whose test files name the data's folder by its path relative to them (``'./new'``
from ``test/specs/``, ``'./specs/new'`` from ``test/``) as a string in their code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from posixpath import basename, dirname, join, relpath

from repo2env.languages.files import RepoFiles
from repo2env.languages.javascript.paths import is_test_file, javascript_paths, runner_test_patterns
from repo2env.languages.javascript.project import ProjectFiles
from repo2env.languages.javascript.runners import matches_paths, script_invocation


def data_files(paths: Sequence[str]) -> list[str]:
    """The test data among a change's ``paths``: test paths that are no code, no runner
    configuration and no snapshot (a snapshot belongs to the test file beside it)."""
    rules = javascript_paths(None)
    return [path for path in paths if rules.classify(path) == "test" and not rules.is_code(path)
            and not rules.is_test_config(path) and "__snapshots__/" not in path and not path.endswith(".snap")]


def tests_reading_data(data_paths: Sequence[str], files: RepoFiles, runner: str, directory: str = "") -> list[str]:
    """The test files of ``files`` (the repository with the change's tests) that read the folders
    of ``data_paths`` (test data, no code), each found from the data's folder up: in the nearest
    folder with test files, those whose text names the data's folder relative to theirs (a string
    that starts with it: ``'./new'``, ``"specs/new/"``, ``'/new'``); in the data's own folder, those
    that name one of its files. Where ``runner``'s configuration or its npm script (in the package
    at ``directory``) names the files it runs, only those count: a benchmark or a script that
    rewrites the data reads the same folder. None found: []."""
    runs = runner_files(files, runner, directory)
    by_folder: dict[str, list[str]] = {}
    for path in files.listing():
        if is_test_file(path) and (not runs or matches_paths(runs, path)):
            by_folder.setdefault(dirname(path), []).append(path)
    found: list[str] = []
    for folder in dict.fromkeys(dirname(path) for path in data_paths):
        for above in _folders_up(folder):
            candidates = [path for path in by_folder.get(above, ()) if path not in found]
            if not candidates:
                continue
            pattern = (_names([basename(path) for path in data_paths if dirname(path) == folder]) if above == folder
                       else _names([relpath(folder, above or ".")]))
            readers = [path for path in candidates if (text := files.read(path)) and pattern.search(text)]
            if readers:
                found.extend(readers)
                break
    return found


def runner_files(files: RepoFiles, runner: str, directory: str = "") -> list[str]:
    """The paths and globs (from the repository root) that ``runner`` runs as its configuration and
    the package's npm test script say: mocha's and ava's settings, the script's paths, jasmine's
    ``spec_dir``/``spec_files`` (from the script's ``--config`` file, else ``spec/support/jasmine.json``).
    Empty when nothing says."""
    project = ProjectFiles.of(files)
    named = list(runner_test_patterns(files, runner))
    invocation = script_invocation(project.package_json(directory), runner)
    named += invocation.paths if invocation else ()
    if runner == "jasmine":
        options = list(invocation.options) if invocation else []
        configs = [value for index, option in enumerate(options) for value in
                   [option.partition("=")[2] if option.startswith("--config=") else
                    options[index + 1] if option == "--config" and index + 1 < len(options) else ""]
                   if value.endswith(".json")]
        for config in [*configs, "spec/support/jasmine.json"]:
            try:
                settings = json.loads(files.read(join(directory, config)) or "null")
            except ValueError:
                continue
            if isinstance(settings, dict):
                spec_dir = str(settings.get("spec_dir") or "spec")
                named += [join(spec_dir, str(pattern)) for pattern in settings.get("spec_files") or ()]
                break
    return [join(directory, pattern.removeprefix("./")) if directory else pattern for pattern in named]


def _folders_up(folder: str) -> list[str]:
    """``folder`` and each folder above it, the root ('') last (none for the root itself)."""
    folders = []
    while folder:
        folders.append(folder)
        folder = dirname(folder)
    return [*folders, ""] if folders else []


def _names(relatives: Sequence[str]) -> re.Pattern[str]:
    """The start of a string literal that names one of ``relatives`` (``new``, ``specs/new``,
    ``case.md``): a quote, then ``./`` or ``/`` or nothing, then the name, then a quote or a slash."""
    return re.compile(r"""['"`](?:\./|/)?(?:""" + "|".join(re.escape(one) for one in relatives) + r""")['"`/]""")
