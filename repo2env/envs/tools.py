"""The agent's ONE tool set over one sandbox: a shell, file reading and editing, the visible tests.

:class:`AgentTools` is what every policy acts through, under one set of names and docstrings:
policy rollouts (:mod:`repo2env.envs.policy`, through :meth:`AgentTools.call` and
:func:`tool_schemas`, the OpenAI function-calling view), RepoEnv in TRL's ``environment_factory``
(which turns public methods with type hints and a Google-style docstring into tools: RepoEnv's
methods take their docstrings from here, :func:`same_tool`), the OpenEnv server's actions, and the
sandbox bridge that host-side harnesses drive (:mod:`repo2env.harness`). The docstrings below are
what the model reads, wherever it meets the task: the learnability gate measures the surface that
training uses.

Every tool returns text and never raises for the agent's mistakes (a bad path, a failing command,
an ambiguous replacement): the error is the tool's answer, so the episode goes on. A refused call's
answer is a :class:`Refusal` (text starting "error: " that servers can tell apart from a command's
own output, to set their error flag); a command that ran and failed is an answer. Failures of the
machinery itself (the Docker engine gone, a closed sandbox) do raise: they say nothing about the
policy and must not be scored as its failure.

Everything runs inside the sandbox as its unprivileged user, file tools included, so they reach
exactly what ``bash`` reaches, and paths resolve (symbolic links followed) inside ``/testbed``.
"""

from __future__ import annotations

import copy
import inspect
import posixpath
import re
import shlex
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from repo2env import defaults
from repo2env.languages import DEFAULT_LANGUAGE, get_profile
from repo2env.languages.test_ids import split_node_id
from repo2env.models import ExecResult, Task
from repo2env.runtime.sandbox import Sandbox

_Method = TypeVar("_Method", bound=Callable[..., str])

WORKDIR = "/testbed"
#: The tools, in the order their schemas are listed.
TOOL_NAMES = ("bash", "read_file", "write_file", "str_replace", "run_tests")
#: What ``run_tests`` runs when no task says otherwise: a Python task's visible tests, as its profile
#: gives them (pytest, stopping at the first failure, writing no cache).
PYTEST_VISIBLE_TESTS = get_profile(DEFAULT_LANGUAGE).visible_tests_command()

_ERROR = "error: "


class Refusal(str):
    """The answer of a tool call that was refused (the agent's mistake: a bad path or argument, an
    ambiguous replacement, an unknown tool): text like any answer, marked as a refusal."""

    __slots__ = ()


def refusal(reason: str) -> Refusal:
    """The answer refusing a call, saying why."""
    return Refusal(_ERROR + reason)
# Above this, a single exec argument hits the kernel's per-argument limit (128 KiB).
_MAX_COMMAND_BYTES = 100_000

# Exit codes of the path-checking shell preamble (chosen clear of cat's and sh's own).
_OUTSIDE, _MISSING, _DIRECTORY, _UNREADABLE, _NO_PARENT, _UNWRITABLE = 71, 72, 73, 74, 75, 76
# Where "$target" really is, links followed (what ``realpath -m`` prints). Starting a program costs a
# few ms in a sandbox, a tool call's budget is ten: a folder that exists is resolved by the shell's
# own ``cd -P`` (its PWD is then the physical path), and realpath runs only for a link in last place
# or a folder that does not exist (yet) or cannot be entered.
_PATH_PREAMBLE = f"""folder=${{target%/*}}
if [ ! -L "$target" ] && cd -P -- "${{folder:-/}}" 2>/dev/null; then
  resolved=${{PWD%/}}/${{target##*/}}
else
  resolved=$(realpath -m -- "$target") || exit {_OUTSIDE}
fi
case "$resolved" in {WORKDIR}|{WORKDIR}/*) ;; *) exit {_OUTSIDE} ;; esac
"""


class AgentTools:
    """The tools of one episode, acting in ``sandbox`` (the repository at /testbed)."""

    def __init__(self, sandbox: Sandbox, *, command_timeout_s: float = float(defaults.TOOL_COMMAND_TIMEOUT_S),
                 test_timeout_s: float = float(defaults.TOOL_TEST_TIMEOUT_S),
                 output_cap_chars: int = defaults.TOOL_OUTPUT_CAP_CHARS, test_command: str = PYTEST_VISIBLE_TESTS) -> None:
        """``output_cap_chars`` bounds every answer, so one tool result cannot flood the context;
        ``test_command`` is what ``run_tests`` runs, its targets appended (:func:`visible_tests_command`
        gives a task's)."""
        self._sandbox = sandbox
        self._test_command = test_command
        self.last_exit_code: int | None = None
        """The exit status of the last command a tool ran (bash, run_tests); None after the others."""
        self._command_timeout_s = command_timeout_s
        self._test_timeout_s = test_timeout_s
        self._output_cap_chars = output_cap_chars

    @property
    def command_timeout_s(self) -> float:
        """The wall-clock limit of one command."""
        return self._command_timeout_s

    def bash(self, command: str) -> str:
        """Run a shell command in the repository at /testbed and return its output.

        Each call starts a fresh shell in /testbed: the working directory and variables do not carry
        over. Long outputs are cut in the middle; the last line gives the exit status.

        Args:
            command: The shell command to run, e.g. "grep -rn 'def slugify' src".

        Returns:
            The combined stdout and stderr, then "[exit N]".
        """
        if "\x00" in command:
            return refusal("the command contains a NUL character")
        if len(command.encode("utf-8")) > _MAX_COMMAND_BYTES:
            return refusal(f"the command is longer than {_MAX_COMMAND_BYTES} bytes; write long content with "
                           "write_file and run it from there")
        result = self._sandbox.exec(command, timeout=self._command_timeout_s, workdir=WORKDIR)
        return self._report(result, self._command_timeout_s)

    def read_file(self, path: str, start_line: int = 1, end_line: int = 0) -> str:
        """Read a text file of the repository, with line numbers.

        Args:
            path: The file's path, relative to /testbed (absolute paths must lie inside /testbed).
            start_line: The first line to show, counting from 1.
            end_line: The last line to show; 0 shows up to the end of the file.

        Returns:
            The lines, each prefixed by its number and a tab.
        """
        if start_line < 1:
            return refusal("start_line counts from 1")
        if end_line and end_line < start_line:
            return refusal(f"end_line ({end_line}) comes before start_line ({start_line})")
        read = self._read(path)
        if isinstance(read, str):
            return read
        text, cut_short = read
        lines = text.splitlines()
        if not lines:
            return f"({path} is empty)"
        if start_line > len(lines):
            return refusal(f"start_line {start_line} is past the end of {path} ({len(lines)} lines)")
        last = min(end_line or len(lines), len(lines))
        shown: list[str] = []
        size = 0
        for number in range(start_line, last + 1):
            line = f"{number:6d}\t{lines[number - 1]}"
            if shown and size + len(line) + 1 > self._output_cap_chars:
                shown.append(f"[output cut at line {number - 1} of {len(lines)}; read on with start_line={number}]")
                break
            shown.append(line)
            size += len(line) + 1
        if cut_short:
            shown.append("[the file is larger than the sandbox's output cap: its end is missing; use bash to read it]")
        return "\n".join(shown)

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a file of the repository with the given content.

        Missing parent directories are created.

        Args:
            path: The file's path, relative to /testbed (absolute paths must lie inside /testbed).
            content: The complete new content of the file.

        Returns:
            A confirmation, or the reason the file was not written.
        """
        target = _inside_workdir(path)
        if target is None:
            return _refused(path)
        # One command, the content on its standard input, run as the sandbox user: the write has
        # exactly that user's rights and follows links the way the agent's own shell would.
        script = f"""target={shlex.quote(target)}
{_PATH_PREAMBLE}[ -d "$target" ] && exit {_DIRECTORY}
[ -d "$folder" ] || mkdir -p -- "$folder" 2>/dev/null || exit {_NO_PARENT}
cat > "$target" 2>/dev/null || exit {_UNWRITABLE}
"""
        result = self._sandbox.exec(script, timeout=self._command_timeout_s, workdir=WORKDIR,
                                    stdin=content.encode("utf-8"))
        if result.exit_code != 0:
            return self._path_error(path, result)
        return f"wrote {len(content)} characters ({len(content.splitlines())} lines) to {path}"

    def str_replace(self, path: str, old: str, new: str) -> str:
        """Replace one exact piece of text in a file of the repository.

        The old text must occur exactly once in the file; include surrounding lines to make it unique.

        Args:
            path: The file's path, relative to /testbed (absolute paths must lie inside /testbed).
            old: The exact text to replace, whitespace and indentation included.
            new: The text to put in its place.

        Returns:
            A confirmation naming the changed lines, or the reason nothing changed.
        """
        if not old:
            return refusal("old is empty: give the exact text to replace")
        read = self._read(path)
        if isinstance(read, str):
            return read
        text, cut_short = read
        if cut_short:
            return refusal(f"{path} is too large to edit with str_replace; use bash")
        if "\ufffd" in text:
            # The text came back with undecodable bytes replaced: writing it back would corrupt them.
            return refusal(f"{path} is not UTF-8 text; edit it with bash")
        count = text.count(old)
        if count == 0:
            return refusal(f"old was not found in {path}; check whitespace and indentation with read_file")
        if count > 1:
            return refusal(f"old occurs {count} times in {path}; include more surrounding lines to make it unique")
        offset = text.index(old)
        written = self.write_file(path, text[:offset] + new + text[offset + len(old):])
        if isinstance(written, Refusal):
            return written
        first = text.count("\n", 0, offset) + 1
        last = first + max(new.count("\n") - (1 if new.endswith("\n") else 0), 0)
        return f"replaced 1 occurrence in {path} (now lines {first}-{last})"

    def run_tests(self, paths: str = "") -> str:
        """Run the repository's visible tests, stopping at the first failure.

        Args:
            paths: Test files, folders or test ids relative to /testbed, separated by spaces (quote an id
                that has spaces), e.g. "tests/test_slug.py" or "tests/test_slug.py::test_max_length";
                empty runs the whole visible suite.

        Returns:
            The test runner's output, then "[exit N]".
        """
        command = self._test_command
        try:
            targets = shlex.split(paths)
        except ValueError as exc:
            return refusal(f"cannot read the test list ({exc})")
        for one in targets:
            file_part = split_node_id(one)[0]
            target = _inside_workdir(file_part)
            if target is None:
                return _refused(file_part)
            # An absolute path cannot be mistaken for a pytest option, whatever the agent wrote.
            command += " " + shlex.quote(target + one[len(file_part):])
        result = self._sandbox.exec(command, timeout=self._test_timeout_s, workdir=WORKDIR)
        return self._report(result, self._test_timeout_s)

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run the tool ``name`` with ``arguments`` (as decoded from a function call) and return its
        answer; an unknown tool or arguments that do not fit its schema give an error text instead.

        Not a tool itself: an environment class built on this one should delegate to it rather than
        inherit from it, or TRL would offer ``call`` to the model as a sixth tool.
        """
        if name not in TOOL_NAMES:
            return refusal(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
        if not isinstance(arguments, dict):
            return refusal(f"the arguments of {name} must be a JSON object")
        parameters = _SCHEMAS[name]["function"]["parameters"]
        properties: dict[str, dict[str, Any]] = parameters["properties"]
        unknown = sorted(set(arguments) - set(properties))
        if unknown:
            return refusal(f"{name} has no argument {', '.join(unknown)}; its arguments are {', '.join(properties)}")
        missing = [argument for argument in parameters["required"] if argument not in arguments]
        if missing:
            return refusal(f"{name} needs the argument {', '.join(missing)}")
        converted: dict[str, Any] = {}
        for argument, value in arguments.items():
            fitted = _fit(value, properties[argument]["type"])
            if fitted is None:
                return refusal(f"argument {argument} of {name} must be of JSON type {properties[argument]['type']}")
            converted[argument] = fitted
        self.last_exit_code = None
        tool = getattr(self, name)
        return tool(**converted)

    def _read(self, path: str) -> tuple[str, bool] | str:
        """(text, cut short by the sandbox's output cap), or an error text for the agent."""
        target = _inside_workdir(path)
        if target is None:
            return _refused(path)
        script = f"""target={shlex.quote(target)}
{_PATH_PREAMBLE}[ -e "$target" ] || exit {_MISSING}
[ -d "$target" ] && exit {_DIRECTORY}
[ -r "$target" ] || exit {_UNREADABLE}
exec cat -- "$target"
"""
        result = self._sandbox.exec(script, timeout=self._command_timeout_s, workdir=WORKDIR)
        if result.exit_code != 0:
            return self._path_error(path, result)
        return result.output, result.truncated

    def _path_error(self, path: str, result: ExecResult) -> str:
        reasons = {
            _OUTSIDE: f"{path} resolves outside {WORKDIR}; only files of the repository can be used",
            _MISSING: f"{path} does not exist",
            _DIRECTORY: f"{path} is a directory",
            _UNREADABLE: f"{path} is not readable",
            _NO_PARENT: f"cannot create the folder of {path}",
            _UNWRITABLE: f"{path} is not writable",
        }
        reason = reasons.get(result.exit_code)
        if reason is None:
            reason = f"{path}: {'timed out' if result.timed_out else result.output.strip()[-300:] or 'failed'}"
        return refusal(reason)

    def _report(self, result: ExecResult, timeout_s: float) -> str:
        self.last_exit_code = result.exit_code
        output = _cap(result.output, self._output_cap_chars)
        notes = []
        if result.truncated:
            notes.append("[output beyond the sandbox's cap was dropped]")
        if result.timed_out:
            notes.append(f"[timed out after {timeout_s:.0f} s: the command was killed]")
        notes.append(f"[exit {result.exit_code}]")
        separator = "" if not output or output.endswith("\n") else "\n"
        return output + separator + "\n".join(notes)


def visible_tests_command(task: Task | None = None) -> str:
    """The command ``run_tests`` runs for ``task`` (its targets appended as absolute paths): its
    language profile's, with the task's runner (pytest for Python, the built spec's runner for
    JavaScript); a Python task's without one."""
    if task is None:
        return PYTEST_VISIBLE_TESTS
    return get_profile(task.language).visible_tests_command(task.env_spec)


def same_tool(name: str) -> Callable[[_Method], _Method]:
    """Mark a method of another class (RepoEnv) as the tool ``name`` of :class:`AgentTools`: it gets
    AgentTools' docstring, which TRL turns into the tool's description, and its signature must be
    AgentTools' own (a TypeError at import otherwise). One tool set, one set of docstrings."""
    source = getattr(AgentTools, name)

    def mark(method: _Method) -> _Method:
        if method.__name__ != name or inspect.signature(method) != inspect.signature(source):
            raise TypeError(f"{method.__qualname__} must be AgentTools.{name}{inspect.signature(source)}")
        method.__doc__ = source.__doc__
        return method

    return mark


def tool_signatures() -> str:
    """The tools' calls as a line of text (``bash(command), read_file(path, start_line=1, ...)``),
    for descriptions of servers whose actions name a tool and its arguments."""
    calls = []
    for schema in tool_schemas():
        function = schema["function"]
        arguments = [name if name in function["parameters"]["required"] else f"{name}={spec['default']!r}"
                     for name, spec in function["parameters"]["properties"].items()]
        calls.append(f"{function['name']}({', '.join(arguments)})")
    return ", ".join(calls)


def tool_schemas() -> list[dict[str, Any]]:
    """The tools in OpenAI's function-calling format (``tools=`` of a Chat Completions request),
    derived from :class:`AgentTools`' signatures and docstrings; a fresh copy on each call."""
    return [copy.deepcopy(_SCHEMAS[name]) for name in TOOL_NAMES]


def _inside_workdir(path: str) -> str | None:
    """The absolute, normalised form of ``path`` (relative to /testbed), or None when it leaves
    /testbed lexically; links are checked inside the sandbox."""
    if not path or "\x00" in path:
        return None
    target = posixpath.normpath(posixpath.join(WORKDIR, path))
    if target != WORKDIR and not target.startswith(WORKDIR + "/"):
        return None
    return target


def _refused(path: str) -> str:
    if not path or "\x00" in path:
        return refusal("give a file path relative to /testbed")
    return refusal(f"{path} is outside {WORKDIR}; only files of the repository can be used")


def _fit(value: Any, json_type: str) -> Any:
    """``value`` as ``json_type`` (integers written as strings or as 3.0 accepted, as models emit
    them), or None when it does not fit."""
    if json_type == "string":
        return value if isinstance(value, str) else None
    if json_type == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            return int(value)
    return None


_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer"}
_SECTION = re.compile(r"^(Args|Arguments|Returns|Raises|Yields|Examples?|Notes?):\s*$")


def _schema_of(method: Any) -> dict[str, Any]:
    """The function-calling schema of one tool method, from its signature and its Google-style
    docstring (summary and ``Args:``); a tool that lacks a description for an argument is a
    programming error and fails at import."""
    hints = typing.get_type_hints(method)
    summary, descriptions = _parse_docstring(inspect.getdoc(method) or "")
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for name, parameter in inspect.signature(method).parameters.items():
        if name == "self":
            continue
        if name not in descriptions or hints.get(name) not in _JSON_TYPES:
            raise TypeError(f"tool {method.__name__}: argument {name} needs a str/int hint and an Args: entry")
        properties[name] = {"type": _JSON_TYPES[hints[name]], "description": descriptions[name]}
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
        else:
            properties[name]["default"] = parameter.default
    return {"type": "function", "function": {
        "name": method.__name__,
        "description": summary,
        "parameters": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False},
    }}


def _parse_docstring(docstring: str) -> tuple[str, dict[str, str]]:
    """(description before the first section, {argument: description}) of a Google-style docstring."""
    summary: list[str] = []
    descriptions: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in docstring.splitlines():
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            summary.append(line.rstrip())
        elif section in ("Args", "Arguments") and line.strip():
            entry = re.match(r"^ {4}(\w+)(?: \([^)]*\))?: (.*)$", line)
            if entry:
                current = entry.group(1)
                descriptions[current] = entry.group(2).strip()
            elif current is not None:
                descriptions[current] += " " + line.strip()
    # The description keeps its line breaks, as transformers' get_json_schema (TRL's view) keeps them:
    # a policy rollout's model reads the very text a trained model read.
    return "\n".join(summary).strip(), descriptions


def _cap(text: str, limit: int) -> str:
    """``text`` cut in the middle to at most about ``limit`` characters: the head shows what ran,
    the tail holds the error or summary."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


_SCHEMAS: dict[str, dict[str, Any]] = {name: _schema_of(getattr(AgentTools, name)) for name in TOOL_NAMES}
