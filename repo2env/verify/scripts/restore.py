"""Step 2 of a grading, run by grade.sh inside the grading sandbox (see grade.sh for the order).

Run with ``python -I -S restore.py SETTINGS.json`` (no site, no .pth, no working directory on
sys.path), in the repository's folder, after the agent's (filtered) patch was applied: nothing
from the patch runs before the tests do, and the interpreter lookup below skips site's customize
hooks for the same reason. Standard library only: the sandbox's system Python may be 3.9.

1. reverts anything that changed outside the accepted paths (``allowed``, one NUL-separated file;
   or, where no host-side filter ran (a Harbor task's verifier), every changed path that does not
   match ``protected_pattern``), removes new top-level modules on the tests' sys.path the gold
   patch does not add, and re-checks the kept Python files for runner references as Python decodes
   them (exit 92);
2. applies the hidden tests (exit 91 when they do not apply) and places the canaries;
3. restores pyproject's pytest sections.

The settings (grade.json, written by repo2env.verify.grader) name the files: ``inputs`` (the
folder holding agent.diff and allowed), ``private`` (the hidden tests' diff and the canaries,
deleted once read), and carry ``gold_paths``, ``runner_pattern``, ``gold_references``.
"""
import ast
import io
import json
import os
import random
import re
import subprocess
import sys
import tokenize

sys.stdout.reconfigure(errors="backslashreplace")  # paths may be any bytes (surrogate-escaped here)
grading = json.load(open(sys.argv[1], encoding="utf-8"))
inputs = grading["inputs"]
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
if grading.get("protected_pattern"):
    # No filter ran before this script (a Harbor task's verifier): the agent's own changes are
    # accepted where the filter's path rules would accept them.
    protected = re.compile(grading["protected_pattern"])
    allowed = {path for path in changed if not protected.search(path)}
else:
    allowed = set(open(os.path.join(inputs, "allowed"), encoding="utf-8", errors="surrogateescape").read().split("\0")) - {""}
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

# The hidden tests, then the canaries: each beside one of the PR's own tests in its module or class
# (before or after it, at random), else at a random place among the scope's tests, so that neither
# its place nor its name tells it from the task's tests. A copy of a task's test comes at the
# indentation it has there; a canary the grader wrote itself is indented into its scope.
# Both come from the agent's own (private) folder and are deleted once used: code in the tests that
# read the hidden tests' diff could tell the canaries from the real tests.
hidden_tests, canaries = os.path.join(grading["private"], "test.diff"), os.path.join(grading["private"], "canaries.json")
applied = subprocess.run(["git", "apply", "--whitespace=nowarn", "--binary", hidden_tests]).returncode
plan = json.load(open(canaries, encoding="utf-8"))
os.remove(hidden_tests)
os.remove(canaries)
if applied:
    sys.exit(91)
rng = random.SystemRandom()
if grading.get("script_runner"):
    # A language runner's canaries: copies of the PR's tests, each inserted before line "at" (inside
    # the describe block of the test it copies, among its tests) once the line "check" names still
    # reads as the hidden tests left it; and whole describe/it blocks appended to the file ("at":
    # None). A copy whose place does not read as expected is left out (it counts as not passed).
    for path, blocks in plan.items():
        lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        places, appended = {}, []
        for block in blocks:
            if isinstance(block, str) or block.get("at") is None:
                appended.append(block if isinstance(block, str) else block["source"])
                continue
            line, text = block["check"]
            if not (0 <= line < len(lines) and lines[line].rstrip("\r\n") == text and 0 <= block["at"] <= len(lines)):
                print("a canary's place does not read as expected in " + path)
                continue
            places.setdefault(block["at"], []).append(block["source"])
        text = []
        for number, line in enumerate(lines + [""]):
            text.extend(places.get(number, []))
            text.append(line)
        if appended:
            text.append("\n" + "\n".join(appended) + "\n")
        open(path, "w", encoding="utf-8").write("".join(text))
    plan = {}
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def scope_of(tree, lines, container):
    """(the statements of the module or of the class ``container`` names, their indentation, the
    index of the line after the scope), or None when there is no such class."""
    body, indent, end = tree.body, "", len(lines)
    for name in container:
        owner = next((node for node in body if isinstance(node, ast.ClassDef) and node.name == name), None)
        if owner is None or not owner.body:
            return None
        body, end = owner.body, owner.end_lineno
        first = lines[body[0].lineno - 1]
        indent = first[:len(first) - len(first.lstrip())]
    return body, indent, end


def start_of(node):
    return min([node.lineno, *[decorator.lineno for decorator in node.decorator_list]]) - 1


for path, blocks in plan.items():
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        tree = None
    defined = {node.name for node in ast.walk(tree) if isinstance(node, DEFINITIONS)} if tree else set()
    if any(block["name"] in defined for block in blocks):
        print("a canary's name is taken in " + path)
        sys.exit(91)
    places = {}
    for block in blocks:
        scope = scope_of(tree, lines, block["container"]) if tree else ((None, "", len(lines)) if not block["container"] else None)
        if scope is None:  # no such class here: the canary is not collected, and counts as not passed
            continue
        body, indent, end = scope
        tests = [node for node in body or [] if isinstance(node, DEFINITIONS) and node.name.lower().startswith("test")]
        near = [node for node in tests if node.name in block["near"]]
        if near:
            chosen = rng.choice(near)
            at, before = rng.choice([(start_of(chosen), True), (chosen.end_lineno, False)])
        else:
            at = rng.choice([start_of(node) for node in tests] + [end])
            before = at != end
        source = block["source"].rstrip("\n") + "\n"
        if block["generated"]:
            source = "".join(indent + line if line.strip() else line for line in source.splitlines(keepends=True))
        gap = "\n" if indent else "\n\n"
        places.setdefault(at, []).append(source + gap if before else gap + source)
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

def restore_pytest_sections(path):
    """``path`` (a pyproject.toml) with the snapshot's pytest tables and the patch's other changes."""
    original = subprocess.run(["git", "show", "HEAD:" + path], capture_output=True)
    original_text = original.stdout.decode("utf-8") if original.returncode == 0 else ""
    current_text = open(path, encoding="utf-8").read()
    kept = [part for part in sections(current_text) if not is_pytest(part[0])]
    restored = [part for part in sections(original_text) if is_pytest(part[0])]
    text = "".join("".join(lines) for _, lines in kept)
    if restored:
        text = text.rstrip("\n") + "\n\n" + "".join("".join(lines) for _, lines in restored)
    # TOML has other spellings of pytest's table: a dotted key under [tool], an inline table, an
    # indented, spaced, quoted or escaped header. A new line that still mentions pytest, or holds an
    # escape, sends the whole file back to the snapshot's (or removes a new one).
    added = set(text.splitlines()) - set(original_text.splitlines())
    if any("pytest" in line.lower() or "\\" in line for line in added) or (original.returncode and not text.strip()):
        revert(path, " (it configures pytest)")
    elif text != current_text:
        open(path, "w", encoding="utf-8").write(text)
        print("restored pytest sections of " + path)


# Every pyproject.toml the patch touched, at any level, and the root's: pytest takes its
# configuration from the one nearest the tests (a package's own, for tests that live inside it),
# so below the root as at it only the snapshot's pytest tables count. The other files pytest reads
# its configuration from (conftest.py, pytest.ini, tox.ini, setup.cfg ...) are protected paths
# anywhere: the patch cannot change them at all.
touched = [path for path in changed if path.rsplit("/", 1)[-1] == "pyproject.toml"]
for path in dict.fromkeys(["pyproject.toml", *touched]):
    if os.path.islink(path):
        if path in touched:  # read through the link, another file would be the configuration
            revert(path, " (a link)")
    elif os.path.isfile(path):
        try:
            restore_pytest_sections(path)
        except UnicodeDecodeError:
            revert(path, " (it is not UTF-8 text)")


# package.json fields a language runner (or Node's loader, or the package manager) reads come back
# as the snapshot has them; the patch's other changes (a new export, a dependency) stay.
for path in [path for path in changed if path == "package.json" or path.endswith("/package.json")]:
    if not grading.get("config_fields"):
        continue
    if os.path.islink(path):  # read through the link, another file would be the configuration
        revert(path, " (a link)")
        continue
    if not os.path.isfile(path):
        continue
    original = snapshot_blobs([path]).get(path)
    try:
        before = json.loads(original.decode("utf-8")) if original is not None else {}
        after = json.load(open(path, encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        revert(path, " (not JSON)")
        continue
    if not isinstance(after, dict) or not isinstance(before, dict):
        revert(path, " (not a JSON object)")
        continue
    for field in grading["config_fields"]:
        if field in before:
            after[field] = before[field]
        else:
            after.pop(field, None)
    open(path, "w", encoding="utf-8").write(json.dumps(after, indent=2) + "\n")
    print("restored the runner's fields of " + path)
