"""What a PR adds to the dependencies the build installs (``javascript/added_dependencies.py``), read
from its patches as text: no Docker, no network."""

from __future__ import annotations

import difflib
import json

from repo2env.languages.javascript.added_dependencies import dependencies_added

BASE = {"name": "zustand", "version": "1.0.0", "scripts": {"test": "jest"},
        "devDependencies": {"@babel/core": "^7.8.4", "jest": "^25.1.0", "typescript": "^3.7.5"},
        "peerDependencies": {"react": ">=16.8"}}


def _json(value: dict) -> str:
    return json.dumps(value, indent=2) + "\n"


def _diff(path: str, before: str | None, after: str | None) -> str:
    """A git-format diff of one file, as ``git diff`` writes it (a new or deleted file included)."""
    old, new = (f"a/{path}" if before is not None else "/dev/null"), (f"b/{path}" if after is not None else "/dev/null")
    header = f"diff --git a/{path} b/{path}\n"
    if before is None:
        header += "new file mode 100644\n"
    if after is None:
        header += "deleted file mode 100644\n"
    lines = difflib.unified_diff((before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True),
                                 old, new)
    return header + "".join(lines)


def _changed(package: dict, **sections: dict) -> dict:
    changed = json.loads(json.dumps(package))
    for section, entries in sections.items():
        changed.setdefault(section, {}).update(entries)
    return changed


def test_a_devdependency_the_fix_adds_is_installed_and_the_rest_is_not():
    after = _changed(BASE, devDependencies={"@babel/plugin-proposal-class-properties": "^7.8.3"},
                     babel={"plugins": ["@babel/plugin-proposal-class-properties"]})
    gold = _diff("src/index.ts", "export {}\n", "export const x = 1\n") + _diff("package.json", _json(BASE), _json(after))
    assert dependencies_added({"package.json": _json(BASE)}, [gold]) == {
        "@babel/plugin-proposal-class-properties": "^7.8.3"}


def test_a_changed_range_is_installed_with_the_prs_range():
    after = _changed(BASE, devDependencies={"typescript": "^3.8.2"}, dependencies={"left-pad": "1.3.0"})
    gold = _diff("package.json", _json(BASE), _json(after))
    assert dependencies_added({"package.json": _json(BASE)}, [gold]) == {"left-pad": "1.3.0", "typescript": "^3.8.2"}


def test_a_removed_moved_or_reformatted_dependency_is_not_installed():
    removed = json.loads(_json(BASE))
    del removed["devDependencies"]["typescript"]
    moved = json.loads(_json(BASE))
    moved["dependencies"] = {"jest": moved["devDependencies"].pop("jest")}
    for after in (_json(removed), _json(moved), json.dumps(BASE, indent=4) + "\n"):
        assert dependencies_added({"package.json": _json(BASE)}, [_diff("package.json", _json(BASE), after)]) == {}


def test_the_workspace_package_being_built_counts_and_the_others_do_not():
    root = {"name": "acme", "private": True, "workspaces": ["packages/*"], "devDependencies": {"jest": "^29.0.0"}}
    core = {"name": "@acme/core", "version": "1.0.0", "dependencies": {"ms": "^2.1.0"}}
    util = {"name": "@acme/util", "version": "1.0.0"}
    files = {"package.json": _json(root), "packages/core/package.json": _json(core),
             "packages/util/package.json": _json(util)}
    gold = (_diff("packages/core/package.json", _json(core),
                  _json(_changed(core, dependencies={"is-odd": "^3.0.1", "@acme/util": "^1.0.0", "ms": "^2.1.3"})))
            + _diff("packages/util/package.json", _json(util), _json(_changed(util, dependencies={"chalk": "^4.0.0"}))))
    tests = _diff("package.json", _json(root), _json(_changed(root, devDependencies={"sinon": "~15.0.0"})))
    # The sibling is the project's own package (a workspace link), not the registry's.
    assert dependencies_added(files, [gold, tests], "packages/core") == {
        "is-odd": "^3.0.1", "ms": "^2.1.3", "sinon": "~15.0.0"}
    assert dependencies_added(files, [gold, tests]) == {"sinon": "~15.0.0"}


def test_ranges_that_do_not_name_a_registry_version_are_left_out():
    after = _changed(BASE, devDependencies={
        "local": "file:../local", "linked": "workspace:*", "forked": "github:acme/forked", "short": "acme/short#v1",
        "tarball": "https://example.com/t.tgz", "--registry=http://evil": "1.0.0", "flag": "--foo",
        "aliased": "npm:left-pad@1.3.0", "tagged": "latest"})
    gold = _diff("package.json", _json(BASE), _json(after))
    assert dependencies_added({"package.json": _json(BASE)}, [gold]) == {"aliased": "npm:left-pad@1.3.0",
                                                                          "tagged": "latest"}


def test_a_patch_that_does_not_touch_package_json_adds_nothing():
    gold = _diff("src/index.js", "module.exports = 1\n", "module.exports = 2\n")
    assert dependencies_added({"package.json": _json(BASE)}, [gold, ""]) == {}


def test_malformed_json_a_patch_that_does_not_apply_or_parse_adds_nothing():
    text = _json(_changed(BASE, devDependencies={"left-pad": "1.3.0"}))
    broken = _diff("package.json", _json(BASE), text.replace('"left-pad": "1.3.0"', '"left-pad": "1.3.0",,'))
    assert dependencies_added({"package.json": _json(BASE)}, [broken]) == {}
    elsewhere = _diff("package.json", _json(_changed(BASE, devDependencies={"jest": "^26.0.0"})), text)
    assert dependencies_added({"package.json": _json(BASE)}, [elsewhere]) == {}
    assert dependencies_added({"package.json": _json(BASE)}, ["@@ -1 +1 @@\n-a\n+b\n"]) == {}
    good = _diff("package.json", _json(BASE), text)
    assert dependencies_added({"package.json": "{not json"}, [good]) == {}  # the hunks do not fit it either
    assert dependencies_added({"package.json": _json(BASE)}, [good]) == {"left-pad": "1.3.0"}


def test_a_package_json_the_pr_creates_or_deletes():
    package = {"name": "fresh", "devDependencies": {"mocha": "^10.0.0"}}
    assert dependencies_added({}, [_diff("package.json", None, _json(package))]) == {"mocha": "^10.0.0"}
    assert dependencies_added({"package.json": _json(package)}, [_diff("package.json", _json(package), None)]) == {}
