"""Grading: an agent's patch, a fresh sandbox of the task's image, the PR's hidden tests, a reward.

The hidden tests (``task.test_patch``) exist only on the host and in the grading sandbox, which
is started fresh from the task image for each grading. Inside it, one script (one ``exec``):

1. applies the filtered agent patch (test files, test configuration, start-up hooks, metadata and
   binary importable files dropped, see :mod:`repo2env.verify.filtering`); a patch that does not
   apply scores 0;
2. reverts anything else that changed outside the accepted paths, restores pyproject's pytest
   sections, removes new top-level modules on the tests' sys.path the gold patch does not add, and
   re-checks the kept Python files for runner references as Python decodes them;
3. applies ``test_patch``, places the canaries (:mod:`repo2env.verify.canaries`) and runs exactly
   FAIL_TO_PASS + PASS_TO_PASS + canaries with the snapshot's pytest configuration named explicitly,
   network off, under a timeout, writing JUnit XML to a random path, while a root collector beside
   it receives every outcome live (:mod:`repo2env.verify.tamper`).

Outcomes come from that XML; whatever is missing, errored, skipped or unreadable counts as failed.
The XML, the live stream, the summary line and pytest's exit status must agree and every canary
must come out as it must, or the grading scores 0 as ``tampered``. Every grading keeps its output,
XML, stream, applied diff and result under its log folder, and :func:`rescore` re-reads them
without running anything.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import secrets
import shlex
import tarfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from repo2env.errors import InputError
from repo2env.jsonl import write_json
from repo2env.models import GradeResult, Task, TestStatus
from repo2env.runtime.bootstrap import AGENT_UID
from repo2env.runtime.sandbox import Runtime, Sandbox, SandboxLimits
from repo2env.verify.canaries import CanaryPlan, plan_canaries
from repo2env.verify.filtering import RUNNER_PATTERN, filter_patch, patch_paths, runner_references
from repo2env.verify.junit import ID_OPTIONS, outcomes_for, selection_args
from repo2env.verify.logs import JUNIT_CAP_BYTES, write_capped_log
from repo2env.verify.reward import RewardMode, score
from repo2env.verify.tamper import COLLECTOR_SCRIPT, PLUGIN_SOURCE, parse_stream, verdict

DEFAULT_TIMEOUT_S = 900.0
_APPLY_FAILED, _TEST_PATCH_FAILED, _RUNNER_REFERENCED = 90, 91, 92
_TRAILER = "REPO2ENV-GRADE-TRAILER"
# Collectors of live outcomes, one per grading in flight (shared: gradings run in many threads).
_COLLECTORS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="repo2env-outcomes")
_COLLECTOR_GRACE_S = 15.0
_OUTPUT_TAIL_BYTES = 200_000

# Runs inside the grading sandbox with `python -I -S` (no site, no .pth, no cwd on sys.path), so
# nothing from the agent's patch runs before the tests do (and its interpreter lookup skips site's
# customize hooks for the same reason).
_RESTORE_SCRIPT = r'''
import ast, io, json, os, random, re, subprocess, sys, tokenize
sys.stdout.reconfigure(errors="backslashreplace")  # paths may be any bytes (surrogate-escaped here)
allowed = set(open(sys.argv[1], encoding="utf-8", errors="surrogateescape").read().split("\0")) - {""}
inputs = os.path.dirname(sys.argv[1])
agent_diff = os.path.join(inputs, "agent.diff")

def git_output(*args):
    return subprocess.run(["git", *args], capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")

def snapshot_blobs(paths):
    """{path: its content at HEAD, or None}, from one git process."""
    paths = [path for path in paths if "\n" not in path]
    if not paths:
        return {}
    output = subprocess.run(["git", "cat-file", "--batch"], input="".join("HEAD:" + path + "\n" for path in paths).encode("utf-8", "surrogateescape"),
                            capture_output=True, check=True).stdout
    blobs = {}
    for path in paths:
        header, _, output = output.partition(b"\n")
        fields = header.split()
        if len(fields) == 3 and fields[1] != b"missing":
            size = int(fields[2])
            blobs[path], output = output[:size], output[size + 1:]
        else:
            blobs[path] = None
    return blobs

def tracked(path):
    return subprocess.run(["git", "cat-file", "-e", "HEAD:" + path], capture_output=True).returncode == 0

def revert(path, reason=""):
    if tracked(path):
        subprocess.run(["git", "checkout", "HEAD", "--", path], check=True)
        print("restored", path + reason)
    elif os.path.lexists(path):
        os.remove(path)
        print("removed", path + reason)

changed = [entry[3:] for entry in git_output("status", "--porcelain", "-z", "-uall", "--no-renames").split("\0") if entry]
# git status leaves out what a .gitignore matches (and the patch may extend .gitignore), and the
# filter's reading of a file header (C-quoted, or a plain diff after a hunk) may not be git's: also
# take every path that git apply itself says the patch touched.
if os.path.getsize(agent_diff):
    records = git_output("apply", "--numstat", "-z", agent_diff).split("\0")
    while records:
        fields = records.pop(0).split("\t", 2)
        if len(fields) == 3:
            changed.extend([fields[2]] if fields[2] else [records.pop(0), records.pop(0)])  # a rename: old, new
for path in dict.fromkeys(changed):
    if path not in allowed:
        revert(path)

# Every folder of /testbed on the tests' sys.path (the root, where `python -m` and rootdir
# conftests put it; src/ or wherever an editable install's .pth points): a new top-level module
# there runs when anything imports its name, and the interpreter and pytest try names at start-up
# that they normally do not find (Debian's sitecustomize tries apport_python_hook, copy tries
# org.python.core). A new top-level name stays only when the gold patch adds the same name in the
# same folder, and never when it shadows an installed module: pytest, a plugin, the standard library.
# The tests' interpreter is asked without running `site`'s customize hooks, which would import
# the very modules under question.
grading = json.load(open(os.path.join(os.path.dirname(sys.argv[1]), "grading.json"), encoding="utf-8"))

def top_level(path, prefix):
    """(the entry right under prefix that path lies in or is, its import name, whether importable)"""
    rest = path[len(prefix):]
    first = rest.split("/", 1)[0]
    importable = "/" in rest or first.endswith((".py", ".pyw", ".pyc", ".so", ".pyd"))
    return prefix + first, first.split(".", 1)[0], importable and first.split(".", 1)[0].isidentifier()

snapshot = snapshot_blobs(sorted(allowed))
new_paths = [path for path in sorted(allowed) if os.path.lexists(path) and snapshot.get(path) is None]
if new_paths:
    lookup = ("import importlib.machinery as m, json, os, site, sys\n"
              "site.addsitepackages(site.venv(set()))\n"
              "here = os.getcwd() + os.sep\n"
              "outside = [p for p in sys.path if os.path.isabs(p) and not (p + os.sep).startswith(here)]\n"
              "inside = [os.path.relpath(p) for p in sys.path if os.path.isabs(p) and (p + os.sep).startswith(here)]\n"
              "print(json.dumps({'inside': inside, 'shadowing': [n for n in sys.argv[1:] "
              "if n in sys.builtin_module_names or m.PathFinder.find_spec(n, outside)]}))")
    names = sorted({part.split(".", 1)[0] for path in new_paths for part in path.split("/")
                    if part.split(".", 1)[0].isidentifier()})
    found = subprocess.run(["python", "-I", "-S", "-c", lookup, *names], capture_output=True, text=True)
    try:
        answer = json.loads(found.stdout)
    except ValueError:  # when the interpreter cannot tell, every new top-level name counts as shadowing
        answer = None
    folders = [""] + [folder.rstrip("/") + "/" for folder in (answer["inside"] if answer else []) if folder != "."]
    for prefix in folders:
        gold = {top_level(path, prefix)[1] for path in grading["gold_paths"] if path.startswith(prefix)}
        for path in new_paths:
            if not path.startswith(prefix) or not os.path.lexists(path):
                continue
            top, name, importable = top_level(path, prefix)
            if not importable or tracked(top):
                continue
            if answer is None or name in answer["shadowing"]:
                revert(path, " (it would shadow the installed module " + name + ")")
            elif name not in gold:
                revert(path, " (a new top-level module " + name + " on the tests' sys.path, not one the gold patch adds)")

# The filter read the patch's added lines as UTF-8 text; Python reads a file in the encoding its
# coding cookie names. Check every kept Python file as it stands now, decoded as Python decodes it.
runner_pattern = re.compile(grading["runner_pattern"])
allowed_references = set(grading["gold_references"])

def python_text(data):
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding, "replace")

references = set()
for path in sorted(allowed):
    if not path.endswith((".py", ".pyw")) or not os.path.isfile(path):
        continue
    try:
        text = python_text(open(path, "rb").read())
        before = snapshot.get(path)
        old_lines = set(python_text(before).splitlines()) if before is not None else set()
    except (SyntaxError, LookupError, UnicodeError):
        references.add("an undecodable source encoding in " + path)
        continue
    for line in text.splitlines():
        if line not in old_lines:
            references.update(match.group(0) for match in runner_pattern.finditer(line))
if references - allowed_references:
    print("REPO2ENV-RUNNER-REFERENCES " + json.dumps(sorted(references - allowed_references)))
    sys.exit(92)

# The hidden tests, then the canaries: each at a random top-level place of its module (before one
# of the module's tests, or at the end), so that neither its place nor its name tells it from the
# task's tests. Methods of a class come last in it: their block ends by attaching them to the class.
# Both come from the agent's own (private) folder and are deleted once used: code in the tests that
# read the hidden tests' diff could tell the canaries from the real tests.
hidden_tests, canaries = sys.argv[2], sys.argv[3]
applied = subprocess.run(["git", "apply", "--whitespace=nowarn", "--binary", hidden_tests]).returncode
plan = json.load(open(canaries, encoding="utf-8"))
os.remove(hidden_tests)
os.remove(canaries)
if applied:
    sys.exit(91)
rng = random.SystemRandom()
for path, blocks in plan.items():
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    try:
        tree = ast.parse("".join(lines))
        starts = [min([node.lineno, *[d.lineno for d in node.decorator_list]]) - 1 for node in tree.body
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.name.lower().startswith("test")]
    except (SyntaxError, ValueError):
        starts = []
    defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} if starts else set()
    if any(block.split("def ", 1)[1].split("(", 1)[0] in defined for block in blocks):
        print("a canary's name is taken in " + path)
        sys.exit(91)
    places = {}
    for block in blocks:
        at = rng.choice(starts + [len(lines)]) if "\ndel " not in block else len(lines)
        places.setdefault(at, []).append(("\n\n" if at == len(lines) else "") + block.lstrip("\n") + "\n\n")
    text = []
    for number, line in enumerate(lines + [""]):
        text.extend(places.get(number, []))
        text.append(line)
    open(path, "w", encoding="utf-8").write("".join(text).rstrip("\n") + "\n")

def sections(text):
    parts, current = [], ["", []]
    for line in text.splitlines(keepends=True):
        if line.startswith("["):
            parts.append(current)
            current = [line.strip().strip("[]").strip(), [line]]
        else:
            current[1].append(line)
    parts.append(current)
    return parts

def is_pytest(header):
    return header == "tool.pytest" or header.startswith(("tool.pytest.", "tool.pytest]"))

if os.path.exists("pyproject.toml"):
    original = subprocess.run(["git", "show", "HEAD:pyproject.toml"], capture_output=True)
    original_text = original.stdout.decode("utf-8") if original.returncode == 0 else ""
    current_text = open("pyproject.toml", encoding="utf-8").read()
    kept = [part for part in sections(current_text) if not is_pytest(part[0])]
    restored = [part for part in sections(original_text) if is_pytest(part[0])]
    text = "".join("".join(lines) for _, lines in kept)
    if restored:
        text = text.rstrip("\n") + "\n\n" + "".join("".join(lines) for _, lines in restored)
    # TOML has other spellings of pytest's table: a dotted key under [tool], an inline table, an
    # indented, spaced, quoted or escaped header. A new line that still mentions pytest, or holds an
    # escape, sends the whole file back to the snapshot's.
    added = set(text.splitlines()) - set(original_text.splitlines())
    if any("pytest" in line.lower() or "\\" in line for line in added):
        revert("pyproject.toml", " (it configures pytest)")
    elif text != current_text:
        open("pyproject.toml", "w", encoding="utf-8").write(text)
        print("restored pytest sections of pyproject.toml")
'''


class Grader:
    """Grades patches for tasks on one runtime; logs go under ``logs_root``."""

    def __init__(self, runtime: Runtime, logs_root: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 limits: SandboxLimits | None = None, keep_warm: bool = False) -> None:
        """``keep_warm``: after each grading, start the next sandbox of the same image in the
        background, so that repeated gradings of a task (validation) skip the container start. A
        spare is never used before it is handed to one grading, so it is as fresh as a new one."""
        self.runtime = runtime
        self.logs_root = Path(logs_root)
        self.timeout_s = timeout_s
        # Never a command channel here: its server would run as the agent, beside the tests' code.
        self.limits = dataclasses.replace(limits or SandboxLimits(exec_timeout_s=timeout_s + 60,
                                                                  output_cap_bytes=50_000_000), persistent_channel=False)
        self.keep_warm = keep_warm
        self._spares: dict[str, Future] = {}
        self._spare_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="repo2env-spare") if keep_warm else None

    def _fresh_sandbox(self, task: Task) -> Sandbox:
        image = task.env_spec.image if task.env_spec else None
        spare = self._spares.pop(image, None) if image else None
        sandbox = None
        if spare is not None:
            try:
                sandbox = spare.result()
            except Exception:  # noqa: BLE001 - a failed spare just means a cold start
                sandbox = None
            if sandbox is not None and not sandbox.alive:  # a spare that waited past its idle lifetime
                sandbox.close()
                sandbox = None
        if sandbox is None:
            sandbox = self.runtime.start(task, limits=self.limits)
        if self._spare_pool is not None and image:
            self._spares[image] = self._spare_pool.submit(self.runtime.start, task, limits=self.limits)
        return sandbox

    def close(self) -> None:
        """Remove any spare sandboxes."""
        spares, self._spares = list(self._spares.values()), {}
        for spare in spares:
            try:
                spare.result().close()
            except Exception:  # noqa: BLE001 - a spare that never started needs no removal
                pass

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def grade(self, task: Task, patch: str, *, mode: RewardMode = "graded", run_name: str | None = None) -> GradeResult:
        """Grade ``patch`` (a git diff against the task's snapshot) for ``task``."""
        test_ids = list(dict.fromkeys([*task.FAIL_TO_PASS, *task.PASS_TO_PASS]))
        if not task.FAIL_TO_PASS:
            raise InputError(f"task {task.instance_id} has no FAIL_TO_PASS tests yet",
                             hint="run 'repo2env validate' first: it derives them")
        run_dir = self.logs_root / task.instance_id / (run_name or time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3))
        run_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        filtered = filter_patch(patch)
        write_capped_log(run_dir / "submitted.diff", patch)
        write_capped_log(run_dir / "applied.diff", filtered.patch)
        base = GradeResult(instance_id=task.instance_id, mode=mode, filtered_paths=list(filtered.dropped_paths),
                           log_dir=str(run_dir))
        tampering = set(filtered.suspicious) - runner_references(task.patch)
        if tampering:
            return self._finish(task, base.model_copy(update={
                "error": f"the patch reaches into the test runner ({', '.join(sorted(tampering))})",
                "tests": {test_id: TestStatus.MISSING for test_id in test_ids}}), run_dir, started)

        inputs = f"/tmp/repo2env-grade-{secrets.token_hex(8)}"
        junit_dir = f"/tmp/repo2env-junit-{secrets.token_hex(8)}"
        junit_path = f"{junit_dir}/{secrets.token_hex(8)}.xml"
        plan = plan_canaries(task.test_patch, task.FAIL_TO_PASS, test_ids)
        stream_plugin = f"repo2env_outcomes_{secrets.token_hex(6)}"
        fifo = f"{inputs}/{secrets.token_hex(8)}.fifo"
        run_ids = _with_canaries(test_ids, plan)
        script = _grading_script(task, run_ids, inputs, junit_path, self.timeout_s, plan=plan,
                                 stream_plugin=stream_plugin, fifo=fifo)
        sandbox = self._fresh_sandbox(task)
        collector: Future | None = None
        try:
            sandbox.put_archive("/tmp", _inputs_archive(inputs, junit_dir, private={
                "test.diff": task.test_patch, "canaries.json": json.dumps(plan.definitions)}, files={
                "agent.diff": filtered.patch, "grade.sh": script,
                "restore.py": _RESTORE_SCRIPT, "allowed": "\0".join(filtered.kept_paths),
                "grading.json": json.dumps({"gold_paths": patch_paths(task.patch), "runner_pattern": RUNNER_PATTERN,
                                            "gold_references": sorted(runner_references(task.patch))}),
                f"plugin/{stream_plugin}.py": PLUGIN_SOURCE.format(fifo=fifo),
            }))
            # The collector runs as root, beside the grading script: what it has read is out of the
            # tests' reach, and its output comes straight here.
            collector = _COLLECTORS.submit(sandbox.exec, ["/bin/sh", "-c", COLLECTOR_SCRIPT, fifo],
                                           timeout=self.timeout_s + 60, user="root")
            result = sandbox.exec(["/bin/bash", f"{inputs}/grade.sh"], timeout=self.timeout_s + 30, workdir="/testbed")
            stream_result = _collected(collector)
            base = base.model_copy(update={"tests_duration_s": round(result.duration_s, 3)})
        except BaseException:
            sandbox.close()
            raise
        sandbox.close(wait=False)  # the result does not wait for the container's removal
        parsed = _parse_trailer(result.output)
        if result.exit_code != 0 or result.truncated:
            # The tests' processes can write into this output too (through /proc/<pid>/fd/1), then
            # kill the script or fill the output cap: a trailer is the script's own only when the
            # script ran to its end and nothing was cut.
            parsed = None
        if parsed is None:
            write_capped_log(run_dir / "test_output.txt", result.output)
            failure = {
                _APPLY_FAILED: ("the patch does not apply to the snapshot", False),
                _TEST_PATCH_FAILED: ("the hidden tests do not apply on top of this patch", True),
                _RUNNER_REFERENCED: (f"the patch reaches into the test runner ({_runner_references(result.output)}; "
                                     "read as Python decodes the files)", True),
            }.get(result.exit_code, (f"the grading script did not finish (exit {result.exit_code}"
                                     f"{', timed out' if result.timed_out else ''}"
                                     f"{', output over the cap' if result.truncated else ''})", True))
            return self._finish(task, base.model_copy(update={
                "patch_applied": failure[1], "error": failure[0], "pytest_exit": result.exit_code,
                "tests": {test_id: TestStatus.MISSING for test_id in test_ids}}), run_dir, started)
        pytest_exit, xml_text, test_output = parsed
        write_capped_log(run_dir / "test_output.txt", test_output)
        if xml_text is not None:
            write_capped_log(run_dir / "junit.xml", xml_text, cap=JUNIT_CAP_BYTES)
        stream = parse_stream(stream_result.output) if stream_result is not None and not stream_result.truncated else None
        write_capped_log(run_dir / "stream.jsonl", stream_result.output if stream_result is not None else "")
        base = base.model_copy(update={"pytest_exit": pytest_exit})
        all_outcomes, error = outcomes_for(run_ids, xml_text)
        outcomes = {test_id: all_outcomes[test_id] for test_id in test_ids}
        write_json(run_dir / "canaries.json", {
            "must_fail": list(plan.must_fail), "must_pass": list(plan.must_pass),
            "junit": {canary.test_id: all_outcomes[canary.test_id] for canary in plan.canaries},
            "stream": {canary.test_id: stream.status(canary.test_id) if stream else None for canary in plan.canaries}})
        if pytest_exit in (124, 137):
            error = f"the tests timed out after {self.timeout_s:.0f} s"
        elif stream_result is None:
            error = "the live outcome stream could not be read"
            outcomes = {test_id: TestStatus.MISSING for test_id in test_ids}
        else:
            lie = verdict(stream=stream, junit=all_outcomes, output=test_output, pytest_exit=pytest_exit,
                          plan=plan, test_ids=test_ids)
            if lie is not None:
                return self._finish(task, base.model_copy(update={
                    "tampered": True, "error": f"tampered: {lie}",
                    "tests": {test_id: TestStatus.ERROR for test_id in test_ids}}), run_dir, started)
        return self._finish(task, base.model_copy(update={"tests": outcomes, "error": error}), run_dir, started)

    def _finish(self, task: Task, result: GradeResult, run_dir: Path, started: float) -> GradeResult:
        parts = score(result.tests, task.FAIL_TO_PASS, task.PASS_TO_PASS, result.mode)
        final = result.model_copy(update={
            "reward": parts.reward, "f2p_rate": parts.f2p_rate, "p2p_rate": parts.p2p_rate,
            "resolved": parts.resolved, "duration_s": round(time.monotonic() - started, 3),
        })
        write_json(run_dir / "result.json", final)
        return final


def rescore(run_dir: Path, task: Task, mode: RewardMode) -> GradeResult:
    """Re-read a grading's logs and score them under ``mode``, running nothing."""
    result_path = Path(run_dir) / "result.json"
    if not result_path.is_file():
        raise InputError(f"no result.json in {run_dir}")
    stored = GradeResult.model_validate_json(result_path.read_text())
    junit = Path(run_dir) / "junit.xml"
    tests = stored.tests
    if junit.is_file() and stored.error is None:
        tests, _ = outcomes_for(list(stored.tests), junit.read_text())
    parts = score(tests, task.FAIL_TO_PASS, task.PASS_TO_PASS, mode)
    return stored.model_copy(update={"mode": mode, "tests": tests, "reward": parts.reward, "f2p_rate": parts.f2p_rate,
                                     "p2p_rate": parts.p2p_rate, "resolved": parts.resolved})


def _grading_script(task: Task, test_ids: list[str], inputs: str, junit_path: str, timeout_s: float, *,
                    plan: CanaryPlan, stream_plugin: str, fifo: str) -> str:
    test_cmd = (task.env_spec.test_cmd if task.env_spec and task.env_spec.test_cmd else "python -m pytest -rA")
    plugin_dir = f"{inputs}/plugin"
    python_path = plugin_dir
    if test_cmd == "python -m pytest" or test_cmd.startswith("python -m pytest "):
        # `python -m` puts the working directory first on sys.path, ahead of every installed module;
        # the launcher puts the outcome plugin's folder there instead.
        test_cmd = "python -c " + shlex.quote(_LAUNCHER.format(plugin_dir=plugin_dir)) + test_cmd[len("python -m pytest"):]
        python_path = ""
    # Quoted one by one: ids hold spaces, brackets, quotes and backslashes.
    ids = " ".join(shlex.quote(argument) for argument in selection_args(test_ids))
    output = f"{junit_path}.out"
    junit_dir = junit_path.rsplit("/", 1)[0]
    config_dirs = " ".join(shlex.quote(folder) for folder in _config_search_dirs(test_ids))
    return f"""set -u
cd /testbed
export PYTHONDONTWRITEBYTECODE=1 PYTEST_ADDOPTS= PYTHONPATH={python_path}
# The outcome plugin by name, not with -p: `-p` makes pytest look the name up among the installed
# entry points too, through the pluggy of the environment, which may be the project under test at
# an old commit without that API (pytest-dev/pluggy).
export PYTEST_PLUGINS={stream_plugin}
# The outcome collector waits for a writer: when pytest never opens its FIFO, this script's end does.
trap '[ -p {fifo} ] && timeout 2 sh -c ": > {fifo}"' EXIT
if [ -s {inputs}/agent.diff ]; then
  git apply --whitespace=nowarn --binary {inputs}/agent.diff || exit {_APPLY_FAILED}
fi
/usr/bin/python3 -I -S {inputs}/restore.py {inputs}/allowed {junit_dir}/test.diff {junit_dir}/canaries.json
restored=$?
case $restored in 0) ;; {_TEST_PATCH_FAILED}|{_RUNNER_REFERENCED}) exit $restored;; *) exit {_APPLY_FAILED};; esac
tries=0
while [ ! -p {fifo} ] && [ $tries -lt 1000 ]; do sleep 0.01; tries=$((tries + 1)); done
# The snapshot's pytest configuration, named explicitly (-c): a file the patch adds is never chosen,
# whatever name a pytest version looks for. pytest's own search order and tests. The rootdir stays
# /testbed ({ID_OPTIONS}), where the test ids are relative to.
config=
for dir in {config_dirs}; do
  for name in pytest.toml .pytest.toml pytest.ini .pytest.ini pyproject.toml tox.ini setup.cfg; do
    file=$dir/$name
    [ -f "$file" ] || continue
    case $name in
      pyproject.toml) grep -q '^\\[tool\\.pytest[].]' "$file" || continue;;
      tox.ini) grep -q '^\\[pytest\\]' "$file" || continue;;
      setup.cfg) grep -q '^\\[tool:pytest\\]' "$file" || continue;;
    esac
    config="-c $file"
    break 2
  done
done
timeout -k 5 {timeout_s:.0f} {test_cmd} $config -p no:cacheprovider {ID_OPTIONS} --junitxml={junit_path} -o junit_family=xunit2 {ids} \\
  >{output} 2>&1 </dev/null
status=$?
# Nothing the tests started may outlive them and touch the report or this script's output: stop
# every other process of this user at once (kill -1 cannot race a fork), kill all of them but this
# shell's ancestors (the exec's wrappers, which must see this script end well: the grader trusts
# the trailer only then), and let the ancestors go on. Builtins only: a fork bomb may have used up
# the pids. Then print the output's tail, the report and, last, the trailer.
kill -STOP -1 2>/dev/null
spare=" $$ " pid=$PPID
while [ "$pid" -gt 0 ] && read -r stat </proc/$pid/stat; do spare+="$pid "; stat=${{stat##*) }}; set -- $stat; pid=$2; done
for dir in /proc/[0-9]*; do case "$spare" in *" ${{dir#/proc/}} "*) ;; *) kill -9 "${{dir#/proc/}}" 2>/dev/null;; esac; done
for pid in $spare; do kill -CONT "$pid" 2>/dev/null; done
tail -c {_OUTPUT_TAIL_BYTES} {output}
if [ -f {junit_path} ]; then size=$(stat -c %s {junit_path}); cat {junit_path}; else size=-1; fi
printf '\\n{_TRAILER} %03d %012d\\n' "$status" "$size"
"""


# `python -m pytest` with the outcome plugin's folder, not the working directory, first on sys.path.
# The working directory (/testbed) goes last instead: the project's own top-level modules import as
# they do under `python -m pytest` (derivation runs that way), but nothing there can shadow the
# standard library, pytest or an installed module; new top-level names are filtered out besides.
_LAUNCHER = ("import os, runpy, sys; sys.path[0] = {plugin_dir!r}; sys.path.append(os.getcwd()); "
             "runpy.run_module('pytest', run_name='__main__', alter_sys=True)")


def _config_search_dirs(test_ids: list[str]) -> list[str]:
    """The folders pytest searches for its configuration, nearest first: from the test files'
    common folder up to the repository's root (``/testbed``)."""
    folders = [test_id.split("::", 1)[0].split("/")[:-1] for test_id in test_ids]
    common: list[str] = []
    for parts in zip(*folders, strict=False) if folders else ():
        if len(set(parts)) != 1 or parts[0] in ("", ".", ".."):
            break
        common.append(parts[0])
    return ["/".join(["/testbed", *common[:depth]]) for depth in range(len(common), -1, -1)]


def _with_canaries(test_ids: list[str], plan: CanaryPlan) -> list[str]:
    """The ids to run: the task's, in their order, with the canaries at random places among them."""
    run_ids = list(test_ids)
    for canary in plan.canaries:
        run_ids.insert(secrets.randbelow(len(run_ids) + 1), canary.test_id)
    return run_ids


def _collected(collector: Future):
    """The collector's result once the grading script has ended (every writer is dead by then),
    or None when it does not end."""
    try:
        return collector.result(timeout=_COLLECTOR_GRACE_S)
    except Exception:  # noqa: BLE001 - an unread stream fails the grading closed
        return None


def _runner_references(output: str) -> str:
    found = re.search(r"^REPO2ENV-RUNNER-REFERENCES (.*)$", output, re.MULTILINE)
    try:
        return ", ".join(json.loads(found.group(1))) if found else "unknown references"
    except ValueError:
        return "unreadable references"


def _parse_trailer(output: str) -> tuple[int, str | None, str] | None:
    """(pytest exit status, JUnit XML or None, test output) from the script's output, or None when
    the trailer is missing (the script did not finish)."""
    raw = output.encode("utf-8", errors="surrogateescape")
    trailer_length = len(_TRAILER) + 1 + 3 + 1 + 12 + 2
    tail = raw[-trailer_length:].decode("ascii", errors="replace")
    match = re.fullmatch(rf"\n{re.escape(_TRAILER)} (\d{{3}}) (-?\d{{11,12}})\n", tail)
    if match is None:
        return None
    status, size = int(match.group(1)), int(match.group(2))
    body = raw[:-trailer_length]
    if size < 0:
        return status, None, body.decode("utf-8", errors="replace")
    if size > len(body):
        return None
    return status, body[len(body) - size:].decode("utf-8", errors="replace"), body[:len(body) - size].decode("utf-8", errors="replace")


def _inputs_archive(inputs: str, junit_dir: str, *, files: dict[str, str], private: dict[str, str]) -> bytes:
    """A tar for /tmp: the inputs folder (root's, read-only to the agent) and the JUnit folder (the
    agent's, because pytest runs as the agent), which also holds the ``private`` files the grading
    script deletes before the tests run."""
    archive = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, uid, mode in ((inputs.removeprefix("/tmp/"), 0, 0o755), (inputs.removeprefix("/tmp/") + "/plugin", 0, 0o755),
                                (junit_dir.removeprefix("/tmp/"), AGENT_UID, 0o700)):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, mode, uid, uid, now
            tar.addfile(info)
        for folder, uid, mode, entries in ((inputs, 0, 0o644, files), (junit_dir, AGENT_UID, 0o600, private)):
            for name, text in entries.items():
                payload = text.encode("utf-8", errors="surrogateescape")  # a patch's bytes, as they came
                info = tarfile.TarInfo(f"{folder.removeprefix('/tmp/')}/{name}")
                info.size, info.mode, info.mtime, info.uid, info.gid = len(payload), mode, now, uid, uid
                tar.addfile(info, io.BytesIO(payload))
    return archive.getvalue()


def load_predictions(path: Path) -> list[dict]:
    """SWE-bench predictions: JSONL (or a JSON list) of {instance_id, model_name_or_path, model_patch}."""
    if not Path(path).is_file():
        raise InputError(f"no predictions file at {path}")
    # Bytes that are not UTF-8 (a patch's Latin-1 lines) stay as they were, as surrogate escapes.
    text = Path(path).read_bytes().decode("utf-8", errors="surrogateescape")
    try:
        rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON lines ({exc.msg}, line {exc.lineno})") from None
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or "instance_id" not in row or "model_patch" not in row:
            raise InputError(f"{path}: prediction {number} needs instance_id and model_patch")
        if not isinstance(row["instance_id"], str):
            raise InputError(f"{path}: prediction {number}: instance_id must be a string")
        if row["model_patch"] is not None and not isinstance(row["model_patch"], str):
            raise InputError(f"{path}: prediction {number} ({row['instance_id']}): model_patch must be a string "
                             f"(a diff) or null, not {type(row['model_patch']).__name__}")
    return rows
