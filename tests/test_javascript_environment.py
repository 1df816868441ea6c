"""JavaScript environment inference and runner detection: pure functions of a repository's files."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from repo2env.languages.javascript.environment import (
    INSTALL_ENV,
    DatePin,
    PackageManager,
    date_pin,
    infer_environment,
    infer_node,
    install_commands,
    install_failure_reason,
    install_ladder,
    node_range_allows,
    package_manager,
    packages_touched,
    typescript_support,
    workspace_packages,
)
from repo2env.languages.javascript.project import ProjectFiles, restore_fields
from repo2env.languages.javascript.runners import (
    COMMON_PACKAGE_JSON_FIELDS,
    PACKAGE_JSON_FIELDS,
    config_files,
    detect_runner,
    detect_runners,
    script_invocation,
)

DAY_2023 = datetime(2023, 6, 1, tzinfo=UTC)


def _package(**fields) -> str:
    return json.dumps({"name": "sample", "version": "1.0.0", **fields})


@pytest.mark.parametrize(("files", "expected"), [
    ({}, ("npm", None, None)),
    ({"package-lock.json": "{}"}, ("npm", None, "package-lock.json")),
    ({"npm-shrinkwrap.json": "{}", "package-lock.json": "{}"}, ("npm", None, "npm-shrinkwrap.json")),
    ({"yarn.lock": "# yarn lockfile v1\n\nleft-pad@^1.0.0:\n  version \"1.3.0\"\n"}, ("yarn", "1.22.22", "yarn.lock")),
    ({"yarn.lock": "__metadata:\n  version: 6\n  cacheKey: 8\n"}, ("yarn-berry", "3", "yarn.lock")),
    ({"yarn.lock": "__metadata:\n  version: 8\n", ".yarnrc.yml": "yarnPath: .yarn/releases/yarn-4.1.0.cjs\n"},
     ("yarn-berry", "4.1.0", "yarn.lock")),
    ({"pnpm-lock.yaml": "lockfileVersion: 5.4\n"}, ("pnpm", "7", "pnpm-lock.yaml")),
    ({"pnpm-lock.yaml": "lockfileVersion: '6.0'\n"}, ("pnpm", "8", "pnpm-lock.yaml")),
    ({"pnpm-lock.yaml": "lockfileVersion: '9.0'\n", "package-lock.json": "{}"}, ("pnpm", "9", "pnpm-lock.yaml")),
    ({"package.json": _package(packageManager="pnpm@8.15.4+sha256.abc"), "pnpm-lock.yaml": "lockfileVersion: '6.0'\n"},
     ("pnpm", "8.15.4", "pnpm-lock.yaml")),
    ({"package.json": _package(packageManager="yarn@3.6.1"), "yarn.lock": "__metadata:\n  version: 6\n"},
     ("yarn-berry", "3.6.1", "yarn.lock")),
    ({"package.json": _package(packageManager="yarn@1.22.19"), "yarn.lock": "# yarn lockfile v1\n"},
     ("yarn", "1.22.19", "yarn.lock")),
])
def test_the_package_manager_comes_from_packagemanager_then_lock_files(files, expected):
    files.setdefault("package.json", _package())
    manager = package_manager(files)
    assert (manager.name, manager.version, manager.lock_file) == expected
    assert manager.reason


def test_a_repository_shipping_its_yarn_runs_that_yarn():
    files = {"package.json": _package(), "yarn.lock": "__metadata:\n  version: 6\n",
             ".yarnrc.yml": "yarnPath: .yarn/releases/yarn-3.2.1.cjs\nnodeLinker: pnp\n"}
    environment = infer_environment(files, DAY_2023)
    assert environment.install == ("node .yarn/releases/yarn-3.2.1.cjs install --immutable",)
    # Plug'n'Play projects get a node_modules folder, so every runner starts the same way.
    assert environment.install_env["YARN_NODE_LINKER"] == "node-modules"


@pytest.mark.parametrize(("manager", "pin", "scripts_off", "expected"), [
    (PackageManager("npm", None, "package-lock.json", ""), DatePin("lockfile", "package-lock.json"), False,
     "npm ci --no-audit --no-fund"),
    (PackageManager("npm", None, "package-lock.json", ""), DatePin("lockfile", "package-lock.json"), True,
     "npm ci --no-audit --no-fund --ignore-scripts"),
    (PackageManager("npm", None, None, ""), DatePin("before", "2019-05-01T10:00:00Z"), False,
     "npm install --no-audit --no-fund --no-package-lock --before=2019-05-01T10:00:00Z"),
    (PackageManager("yarn", "1.22.22", "yarn.lock", ""), DatePin("lockfile", "yarn.lock"), True,
     "npm install --global --prefix /tmp/repo2env-pm --no-audit --no-fund --loglevel=error yarn@1.22.22 && /tmp/repo2env-pm/bin/yarn install --frozen-lockfile --non-interactive --network-timeout 600000 "
     "--ignore-scripts"),
    (PackageManager("yarn-berry", "4.1.0", "yarn.lock", ""), DatePin("lockfile", "yarn.lock"), True,
     "npm install --global --prefix /tmp/repo2env-pm --no-audit --no-fund --loglevel=error @yarnpkg/cli-dist@4.1.0 && "
     "/tmp/repo2env-pm/bin/yarn install --immutable --mode=skip-build"),
    (PackageManager("pnpm", "8", "pnpm-lock.yaml", ""), DatePin("lockfile", "pnpm-lock.yaml"), False,
     "npm install --global --prefix /tmp/repo2env-pm --no-audit --no-fund --loglevel=error pnpm@8 && /tmp/repo2env-pm/bin/pnpm install --frozen-lockfile"),
])
def test_install_commands_are_frozen_to_the_lock_file_or_pinned_by_date(manager, pin, scripts_off, expected):
    assert install_commands(manager, pin, ignore_scripts=scripts_off) == (expected,)


def test_the_pin_is_the_lock_file_else_the_commit_date():
    assert date_pin({"package.json": _package(), "yarn.lock": "# v1\n"}, DAY_2023) == DatePin("lockfile", "yarn.lock")
    assert date_pin({"package.json": _package()}, datetime(2020, 2, 3, 4, 5, 6, tzinfo=UTC)) == \
        DatePin("before", "2020-02-03T04:05:06Z")
    environment = infer_environment({"package.json": _package()}, DAY_2023)
    rungs = dict(install_ladder(environment))
    assert list(rungs) == ["pinned", "no-scripts", "unpinned", "unpinned-no-scripts"]
    assert "--before=" not in rungs["unpinned"][0] and "--ignore-scripts" in rungs["no-scripts"][0]
    assert "--before=" not in rungs["unpinned-no-scripts"][0] and "--ignore-scripts" in rungs["unpinned-no-scripts"][0]
    locked = dict(install_ladder(infer_environment({"package.json": _package(), "package-lock.json": "{}"}, DAY_2023)))
    assert list(locked) == ["pinned", "no-scripts", "npm-install"]
    assert INSTALL_ENV["PUPPETEER_SKIP_DOWNLOAD"] == "1" and INSTALL_ENV["HUSKY"] == "0"


@pytest.mark.parametrize(("log", "reason"), [
    ("npm ERR! code ENOVERSIONS\nnpm ERR! No versions available for mocha", "registry_dates"),
    ("npm ERR! `npm ci` can only install packages when your package.json and package-lock.json are in sync",
     "lockfile_out_of_sync"),
    ("error Your lockfile needs to be updated, but yarn was run with `--frozen-lockfile`.", "lockfile_out_of_sync"),
    ("ERR_PNPM_OUTDATED_LOCKFILE  Cannot install with \"frozen-lockfile\"", "lockfile_out_of_sync"),
    ("npm ERR! code ETARGET\nnpm ERR! notarget No matching version found for cbor2@^2.4.0.", "missing_version"),
    ("gyp ERR! build error", "native_build"),
    ("npm ERR! network request to https://github.com/markedjs/marked/tarball/v15.0.11 failed, reason: getaddrinfo "
     "ENOTFOUND github.com", "git_host_dependency"),
    ("npm ERR! code EAI_AGAIN", "network"),
    ("error sample@1.0.0: The engine \"node\" is incompatible with this module.", "node_version"),
    ("something else", "install_failed"),
])
def test_install_failures_are_classed_for_the_next_rung(log, reason):
    assert install_failure_reason(log) == reason


@pytest.mark.parametrize(("range_text", "allowed"), [
    (">=14", {18, 20}),
    ("^12.17.0 || ^14.13 || >=16.0.0", {12, 18, 20}),
    ("12.x", {12}),
    ("<=16", {12}),
    (">= 0.10.0", {12, 18, 20}),
    ("14 - 18", {18}),
    (">=12 <19", {12, 18}),
    ("~18.19.0", {18}),
    (">12.22.12", {12, 18, 20}),
    ("*", {12, 18, 20}),
])
def test_engines_ranges_allow_the_majors_they_name(range_text, allowed):
    assert {major for major in (12, 18, 20) if node_range_allows(range_text, major)} == allowed


def test_an_unreadable_range_is_not_guessed():
    assert node_range_allows(">=banana", 18) is None


@pytest.mark.parametrize(("files", "day", "expected", "reason_part"), [
    ({}, datetime(2018, 5, 1, tzinfo=UTC), "12", "commit date 2018-05-01"),
    ({}, datetime(2022, 9, 1, tzinfo=UTC), "18", "commit date"),
    ({}, datetime(2025, 1, 1, tzinfo=UTC), "20", "commit date"),
    ({"package.json": _package(engines={"node": ">=14"})}, datetime(2021, 1, 1, tzinfo=UTC), "18", "engines.node >=14"),
    ({"package.json": _package(engines={"node": ">=16"})}, datetime(2025, 1, 1, tzinfo=UTC), "20", "engines.node"),
    ({".nvmrc": "v16.13.0\n"}, datetime(2025, 1, 1, tzinfo=UTC), "18", ".nvmrc v16.13.0"),
    ({".nvmrc": "lts/hydrogen"}, datetime(2025, 1, 1, tzinfo=UTC), "18", ".nvmrc lts/hydrogen"),
    ({".node-version": "12.22.1"}, datetime(2025, 1, 1, tzinfo=UTC), "12", ".node-version"),
    ({"package.json": _package(volta={"node": "20.11.0"})}, datetime(2019, 1, 1, tzinfo=UTC), "20", "volta.node"),
    ({".github/workflows/ci.yml": "jobs:\n  test:\n    strategy:\n      matrix:\n        node-version: [10.x, 12.x]\n"},
     datetime(2024, 1, 1, tzinfo=UTC), "12", "ci.yml matrix 10-12"),
    ({".travis.yml": "language: node_js\nnode_js:\n  - '8'\n  - '10'\n"}, datetime(2019, 1, 1, tzinfo=UTC), "12",
     ".travis.yml node_js 8-10"),
])
def test_the_node_version_follows_pins_engines_ci_and_the_date(files, day, expected, reason_part):
    files.setdefault("package.json", _package())
    node, reason = infer_node(files, day)
    assert node == expected and reason_part in reason, reason


def test_a_node_without_a_base_image_is_named_and_a_local_one_is_used():
    files = {"package.json": _package(engines={"node": ">=22"})}
    node, reason = infer_node(files, datetime(2024, 9, 1, tzinfo=UTC))
    assert node == "20" and "Node 22 fits better: no base image" in reason
    assert infer_node(files, datetime(2024, 9, 1, tzinfo=UTC), available=("12", "18", "20", "22"))[0] == "22"


def test_pnpm_moves_node_up_to_what_it_needs():
    files = {"package.json": _package(packageManager="pnpm@9.1.0"), "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"}
    environment = infer_environment(files, datetime(2019, 1, 1, tzinfo=UTC))
    assert environment.node == "18" and "pnpm 9.1.0 needs Node 18+" in environment.node_reason


def test_workspace_packages_and_the_package_a_change_touches():
    files = {
        "package.json": _package(workspaces=["packages/*", "tools/cli"]),
        "packages/core/package.json": _package(name="@x/core"), "packages/core/src/a.js": "",
        "packages/web/package.json": _package(name="@x/web"),
        "tools/cli/package.json": _package(name="cli"), "tools/other/package.json": _package(name="other"),
        "node_modules/dep/package.json": _package(name="dep"),
    }
    assert workspace_packages(files) == ["packages/core", "packages/web", "tools/cli"]
    assert packages_touched(files, ["packages/core/src/a.js", "packages/core/test/a.test.js"]) == ["packages/core"]
    assert packages_touched(files, ["README.md", "packages/web/x.js"]) == ["", "packages/web"]
    yarn = {"package.json": _package(workspaces={"packages": ["libs/**"]}), "libs/a/b/package.json": _package()}
    assert workspace_packages(yarn) == ["libs/a/b"]
    pnpm = {"package.json": _package(), "pnpm-workspace.yaml": "packages:\n  - 'apps/*'\n  - '!apps/skip'\n",
            "apps/one/package.json": _package(), "apps/skip/package.json": _package()}
    assert workspace_packages(pnpm) == ["apps/one"]
    assert packages_touched({"package.json": _package()}, ["src/a.js"]) == [""]


@pytest.mark.parametrize(("package", "extra", "expected"), [
    ({"scripts": {"test": "jest"}}, {}, "jest"),
    ({"scripts": {"test": "npm run lint && npm run test:unit", "test:unit": "vitest run"}}, {}, "vitest"),
    ({"scripts": {"test": "xo && c8 ava && tsd"}}, {}, "ava"),
    ({"scripts": {"test": "node --test --test-reporter=spec test/"}}, {}, "node"),
    ({"scripts": {"test": "tape 'test/**/*.js' | tap-spec"}}, {}, "tape"),
    ({"scripts": {"test": "node bin/ssl_hotfix.js grunt test"}, "devDependencies": {"mocha": "^8"}}, {}, "mocha"),
    ({"scripts": {"build": "tsc"}}, {"vitest.config.ts": "export default {}"}, "vitest"),
    ({"scripts": {"build": "vite build"}}, {"vite.config.ts": "export default {}"}, None),
    ({"scripts": {"test": "node test"}}, {}, None),
])
def test_the_runner_is_detected_from_scripts_config_and_dependencies(package, extra, expected):
    files = {"package.json": json.dumps(package), **extra}
    found = detect_runner(files)
    assert (found.runner if found else None) == expected
    if found:
        assert found.reason


def test_the_scripts_runner_outranks_a_mere_dependency():
    package = {"scripts": {"test": "mocha test/"}, "devDependencies": {"jest": "^29", "mocha": "^10"}}
    assert [evidence.runner for evidence in detect_runners({"package.json": json.dumps(package)})] == ["mocha", "jest"]


@pytest.mark.parametrize(("script", "runner", "env", "options"), [
    ("mocha --require test/support/env --reporter spec --check-leaks test/ test/acceptance/", "mocha", {},
     ("--require", "test/support/env", "--check-leaks")),
    ("node bin/ssl_hotfix.js mocha test/unit/**/*.js --timeout 30000 --exit", "mocha", {}, ("--timeout", "30000", "--exit")),
    ("cross-env TZ=Pacific/Auckland jest test/timezone.test --coverage=false --bail", "jest", {"TZ": "Pacific/Auckland"},
     ()),
    ("nyc --reporter=lcov mocha -r ts-node/register --grep foo 'test/**/*.spec.ts'", "mocha", {},
     ("-r", "ts-node/register")),
    ("vitest --ui --coverage --environment jsdom", "vitest", {}, ("--environment", "jsdom")),
    ("NODE_ENV=test ava --verbose --timeout=2m", "ava", {"NODE_ENV": "test"}, ("--timeout=2m",)),
    # Our cache folder replaces the project's (it may lie in the work tree, where a patch reaches).
    ("jest --cacheDirectory .jest-cache --runInBand", "jest", {}, ("--runInBand",)),
])
def test_the_scripts_options_are_kept_or_dropped(script, runner, env, options):
    invocation = script_invocation({"scripts": {"test": script}}, runner)
    assert invocation is not None and invocation.env == env and invocation.options == options


@pytest.mark.parametrize(("scripts", "env", "paths"), [
    # dayjs 2018-2025: the first jest the test script runs is test-tz's, in Auckland.
    ({"test": "TZ=Pacific/Auckland npm run test-tz && TZ=Europe/London npm run test-tz && npm run test-tz && jest",
      "test-tz": "date && jest test/timezone.test --coverage=false"}, {"TZ": "Pacific/Auckland"}, ("test/timezone.test",)),
    ({"test": "cross-env NODE_ENV=test npm run unit", "unit": "FOO=1 jest test"}, {"NODE_ENV": "test", "FOO": "1"},
     ("test",)),
    ({"test": "echo TZ=UTC npm run unit", "unit": "jest"}, {}, ()),  # echo's words set nothing
    ({"test": "npm run lint && jest a", "lint": "eslint ."}, {}, ("a",)),
    ({"test": "npm run build && TZ=UTC npm run unit", "build": "tsc", "unit": "jest"}, {"TZ": "UTC"}, ()),
])
def test_the_first_runner_call_in_the_order_scripts_run_keeps_the_environment_its_caller_sets(scripts, env, paths):
    invocation = script_invocation({"scripts": scripts}, "jest")
    assert invocation is not None and (invocation.env, invocation.paths) == (env, paths)


def test_node_test_keeps_nodes_own_loader_flags():
    invocation = script_invocation({"scripts": {"test": "node --import tsx --test --test-reporter=spec test/"}}, "node")
    assert invocation is not None and invocation.node_options == ("--import", "tsx")


def test_config_files_include_what_the_script_and_the_config_name():
    files = {
        "package.json": json.dumps({"scripts": {"test": "mocha --require test/support/env test/"}}),
        "test/support/env.js": "", ".mocharc.yml": "", "tsconfig.json": "{}", ".npmrc": "", "src/index.js": "",
        "test/a.test.js": "", "babel.config.js": "",
    }
    assert config_files("mocha", files) == [".mocharc.yml", ".npmrc", "babel.config.js", "package.json",
                                            "test/support/env.js", "tsconfig.json"]
    jest = {"package.json": json.dumps({"jest": {"setupFilesAfterEnv": ["<rootDir>/test/setup.ts"]}}),
            "test/setup.ts": "", "jest.config.js": "", "test/__mocks__/fs.js": "", "test/a.test.js": ""}
    assert config_files("jest", jest) == ["jest.config.js", "package.json", "test/__mocks__/fs.js", "test/setup.ts"]
    vitest = {"package.json": "{}", "vitest.config.ts": "export default { test: { setupFiles: ['./tests/setup.ts'], "
              "environment: 'jsdom', globalSetup: 'tests/global.js' }, resolve: { alias: { x: './src/index.ts' } } }",
              "tests/setup.ts": "", "tests/global.js": "", "tests/a.test.ts": "", "src/index.ts": ""}
    assert config_files("vitest", vitest) == ["package.json", "tests/global.js", "tests/setup.ts", "vitest.config.ts"]


@pytest.mark.parametrize(("files", "runner", "transform"), [
    ({"package.json": json.dumps({"jest": {"preset": "ts-jest"}})}, "jest", "ts-jest"),
    ({"package.json": json.dumps({"devDependencies": {"ts-jest": "^29"}})}, "jest", "ts-jest"),
    ({"package.json": json.dumps({"devDependencies": {"@babel/preset-typescript": "^7"}})}, "jest", "babel"),
    ({"package.json": json.dumps({}), ".babelrc.js": "plugins: [['@babel/plugin-transform-typescript', {}]]"}, "jest",
     "babel"),
    ({"package.json": json.dumps({})}, "vitest", "vitest"),
    ({"package.json": json.dumps({"scripts": {"test": "mocha -r ts-node/register 'test/**/*.ts'"}})}, "mocha", "ts-node"),
    ({"package.json": json.dumps({}), ".mocharc.json": json.dumps({"import": "tsx"})}, "mocha", "tsx"),
    ({"package.json": json.dumps({})}, "ava", None),
])
def test_typescript_runs_through_the_projects_own_transform(files, runner, transform):
    assert typescript_support(files, runner).transform == transform


def test_files_can_come_from_a_reader_callable():
    store = {"package.json": _package(engines={"node": ">=18"}), "package-lock.json": "{}"}
    reads: list[str] = []

    def reader(path: str) -> str | None:
        reads.append(path)
        return store.get(path)

    files = ProjectFiles.of(reader, store)
    environment = infer_environment(files, DAY_2023)
    assert environment.node == "20" and environment.pin == DatePin("lockfile", "package-lock.json")
    assert reads.count("package.json") == 1  # each file is read once


def test_package_json_keeps_the_patchs_dependencies_and_the_bases_runner_fields():
    base = json.dumps({"name": "x", "scripts": {"test": "jest"}, "jest": {"testEnvironment": "node"},
                       "dependencies": {"a": "1"}}, indent=2)
    patched = json.dumps({"name": "x", "scripts": {"test": "jest --passWithNoTests"}, "jest": {"setupFiles": ["evil.js"]},
                          "type": "module", "dependencies": {"a": "1", "b": "2"}}, indent=4)
    restored = json.loads(restore_fields(base, patched, [*PACKAGE_JSON_FIELDS["jest"], *COMMON_PACKAGE_JSON_FIELDS]))
    assert restored == {"name": "x", "scripts": {"test": "jest"}, "jest": {"testEnvironment": "node"},
                        "dependencies": {"a": "1", "b": "2"}}
    assert restore_fields(base, "{ not json", ["jest"]) == base
    assert restore_fields(None, patched, ["jest"]).startswith("{\n    \"name\"")


def test_a_jest_task_image_warms_jests_cache_as_every_run_of_ours_uses_it():
    """The task layer's cache warm-up runs jest with the plan's options, variables and cache folder
    (jest's cache key holds the configuration and the folder: a run with other ones would miss),
    over the whole suite, with a test name no test has; the Dockerfile runs it as the agent, its
    failure ignored. Runners that keep no transform cache get none."""
    from repo2env.languages.javascript.build import JavaScriptBuild, JsOwnCode
    from repo2env.languages.javascript.runner import javascript_facts
    from repo2env.models import EnvSpec, Task
    from repo2env.runtime.images import task_dockerfile
    from repo2env.runtime.package_access import PackageAccess

    spec = EnvSpec(status="env_ok", base="node18", node="18", test_runner="jest", test_cmd="jest --runInBand",
                   test_env={"TZ": "Pacific/Auckland"})
    task = Task(instance_id="acme__padkit-1", repo="acme/padkit", language="javascript", pull_number=1,
                base_commit="0" * 40, patch="", test_patch="", problem_statement="x",
                created_at="2024-01-01T00:00:00Z", env_spec=spec)
    layer = JavaScriptBuild().task_layer(spec, JsOwnCode(()), task)
    plan = javascript_facts(spec).plan(["test/a.test.js::a > b"], "/tmp/reports")
    for part in ("--cacheDirectory=/tmp/.repo2env-jest-cache", "--coverage=false", "--runInBand", "TZ=Pacific/Auckland",
                 "cd /testbed"):
        assert part in layer.cache_warmup and part in plan.command, part
    assert "--runTestsByPath" not in layer.cache_warmup and "-t '^repo2env-cache-warm-up" in layer.cache_warmup
    dockerfile = task_dockerfile("env:tag", PackageAccess(), layer).splitlines()
    warm = next(index for index, line in enumerate(dockerfile) if "repo2env-cache-warm-up" in line)
    assert dockerfile[warm - 1] == "USER 1000" and dockerfile[warm + 1] == "USER root", dockerfile
    assert "cache warm-up exit $?" in dockerfile[warm] and ".git/info/exclude" in dockerfile[warm]
    mocha = spec.model_copy(update={"test_runner": "mocha", "test_cmd": "mocha"})
    assert JavaScriptBuild().task_layer(mocha, JsOwnCode(()), task).cache_warmup is None
