"""The project configuration read from a repository's files (:class:`RepoFiles`, re-exported here)."""

from __future__ import annotations

import ast
import configparser
import copy
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from repo2env import pysyntax
from repo2env.languages.files import DictRepoFiles, RepoFiles  # noqa: F401 - DictRepoFiles re-exported
from repo2env.settings import load_yaml_text

if TYPE_CHECKING:
    pass


@dataclass
class _Project:
    """The parsed packaging and test configuration of a repository; empty parts when absent."""

    files: RepoFiles
    listing: list[str]
    pyproject: dict[str, Any] = field(default_factory=dict)
    pyproject_text: str = ""
    setup_cfg: configparser.ConfigParser | None = None
    setup_cfg_text: str = ""
    setup_py: str = ""
    setup_keywords: dict[str, Any] = field(default_factory=dict)
    tox: configparser.ConfigParser | None = None

    @property
    def installable(self) -> bool:
        """Whether ``pip install .`` has something to build."""
        if self.setup_py:
            return True
        if self.pyproject.keys() & {"project", "build-system"} or "poetry" in self.pyproject.get("tool", {}):
            return True
        return self.setup_cfg is not None and (
            self.setup_cfg.has_section("metadata") or self.setup_cfg.has_section("options"))

    def tool(self, *keys: str) -> Any:
        """``pyproject.toml``'s ``[tool.<keys>]`` value, or None."""
        node: Any = self.pyproject.get("tool", {})
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node


def _read_project(files: RepoFiles) -> _Project:
    project = _Project(files=files, listing=files.listing())
    project.pyproject_text = files.read("pyproject.toml") or ""
    if project.pyproject_text:
        try:
            project.pyproject = tomllib.loads(project.pyproject_text)
        except tomllib.TOMLDecodeError:
            project.pyproject = {}
    project.setup_cfg_text = files.read("setup.cfg") or ""
    project.setup_cfg = _parse_ini(project.setup_cfg_text)
    project.setup_py = files.read("setup.py") or ""
    project.setup_keywords = _setup_py_keywords(project.setup_py)
    project.tox = _tox_config(project)
    return project


def _parse_ini(text: str) -> configparser.ConfigParser | None:
    if not text:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def _ini_get(parser: configparser.ConfigParser | None, section: str, key: str) -> str | None:
    if parser is None or not parser.has_section(section):
        return None
    return parser.get(section, key, fallback=None)


def _ini_lines(value: str | None) -> list[str]:
    """A multi-line ini value as its non-empty, non-comment lines."""
    if not value:
        return []
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


def _tox_config(project: _Project) -> configparser.ConfigParser | None:
    """tox's configuration as an ini file with ``[tox]`` and ``[testenv]`` sections, wherever it lives."""
    tox_ini = _parse_ini(project.files.read("tox.ini") or "")
    if tox_ini is not None and (tox_ini.has_section("tox") or tox_ini.has_section("testenv")):
        return tox_ini
    if project.setup_cfg is not None and project.setup_cfg.has_section("tox:tox"):
        embedded = configparser.ConfigParser(interpolation=None, strict=False)
        embedded.read_dict({"tox": dict(project.setup_cfg.items("tox:tox"))})
        if project.setup_cfg.has_section("testenv"):
            embedded.read_dict({"testenv": dict(project.setup_cfg.items("testenv"))})
        return embedded
    legacy = project.tool("tox", "legacy_tox_ini")
    if isinstance(legacy, str):
        return _parse_ini(legacy)
    return None


# setup.py is code; these keywords are read from the literal values passed to setup(), following
# module-level names (EXTRAS = {...}; setup(extras_require=EXTRAS)) one step.
_SETUP_KEYWORDS = ("python_requires", "install_requires", "extras_require", "tests_require", "setup_requires",
                   "ext_modules", "name", "packages", "py_modules", "package_dir")  # the last four: own_code.py
_UNRESOLVED = object()  # a keyword passed to setup() whose value is not a literal


def _setup_py_keywords(text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        tree = pysyntax.parse(text)
    except (SyntaxError, ValueError):
        return _setup_py_keywords_by_pattern(text)
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and (entry := _dict_entry(node, names)):
            names[entry[0]] = entry[1]
    keywords: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if callee != "setup":
            continue
        for keyword in node.keywords:
            if keyword.arg in _SETUP_KEYWORDS:
                value = _literal(keyword.value, names)
                keywords[keyword.arg] = value if value is not None else _UNRESOLVED
    if "python_requires" not in keywords or keywords["python_requires"] is _UNRESOLVED:
        keywords.update({k: v for k, v in _setup_py_keywords_by_pattern(text).items() if k == "python_requires"})
    return keywords


def _dict_entry(node: ast.Assign, names: Mapping[str, ast.expr]) -> tuple[str, ast.Dict] | None:
    """A top-level ``NAME["key"] = value`` on a dict literal: (NAME, the dict with that entry).

    ``EXTRAS_REQUIRE["tests"] = EXTRAS_REQUIRE["tests_no_zope"] + ["zope.interface"]`` (attrs): the
    value reads the dict as it stood before, so ``NAME`` in it is replaced by that earlier dict.
    """
    target = node.targets[0]
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
            and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)):
        return None
    earlier = names.get(target.value.id)
    if not isinstance(earlier, ast.Dict):
        return None

    class Earlier(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.expr:
            return earlier if name.id == target.value.id else name

    value = Earlier().visit(copy.deepcopy(node.value))
    return target.value.id, ast.Dict(keys=[*earlier.keys, target.slice], values=[*earlier.values, value])


def _literal(node: ast.expr, names: Mapping[str, ast.expr], depth: int = 0) -> Any:
    """The value of a literal expression, or None. Dict values that are not literals become None."""
    if depth > 8:
        return None
    if isinstance(node, ast.Name) and node.id in names:
        return _literal(names[node.id], names, depth + 1)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        container = _literal(node.value, names, depth + 1)
        return container.get(node.slice.value) if isinstance(container, dict) else None
    if isinstance(node, ast.Dict):
        entries = ((_literal(key, names, depth + 1), value) for key, value in zip(node.keys, node.values, strict=True)
                   if key is not None)
        return {key: _literal(value, names, depth + 1) for key, value in entries if isinstance(key, str)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return {keyword.arg: _literal(keyword.value, names, depth + 1) for keyword in node.keywords if keyword.arg}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, names, depth + 1), _literal(node.right, names, depth + 1)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        return None
    if isinstance(node, ast.List | ast.Tuple):
        items = [_literal(item, names, depth + 1) for item in node.elts]
        return [item for item in items if item is not None]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _setup_py_keywords_by_pattern(text: str) -> dict[str, Any]:
    """Fallback for a setup.py that does not parse as Python 3 (print statements and the like)."""
    keywords: dict[str, Any] = {}
    if match := re.search(r"python_requires\s*=\s*(['\"])(.+?)\1", text):
        keywords["python_requires"] = match.group(2)
    if "extras_require" in text:
        names = re.findall(r"['\"]([A-Za-z][\w.-]*)['\"]\s*:", text)
        keywords["extras_require"] = dict.fromkeys(names)
    if "Extension(" in text:
        keywords["ext_modules"] = _UNRESOLVED
    return keywords


def _load_yaml_quietly(text: str | None) -> Any:
    if not text:
        return None
    try:
        return load_yaml_text(text)
    except yaml.YAMLError:
        return None


def _valid_requirement(line: str) -> str | None:
    """``line`` if it is a PEP 508 requirement by name (not a path, URL, option or tox substitution)."""
    text = line.split(" #", 1)[0].strip()
    if not text or text.startswith(("-", ".", "/")) or "{" in text:
        return None
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    return None if requirement.url else text


def _poetry_constraint(constraint: str) -> str | None:
    """Poetry's ``^1.2``/``~1.2``/``1.2.*`` constraints in PEP 440; None for ``||`` alternatives."""
    if "||" in constraint or "|" in constraint:
        return None
    parts = []
    for part in (piece.strip() for piece in constraint.split(",")):
        if part in ("", "*"):
            continue
        if part.startswith("^") or (part.startswith("~") and not part.startswith("~=")):
            numbers = [int(n) for n in re.findall(r"\d+", part)]
            if not numbers:
                return None
            if part.startswith("^"):
                # ^ bumps the first non-zero component: ^1.2 -> <2, ^0.2 -> <0.3, ^0.0.3 -> <0.0.4.
                index = next((i for i, n in enumerate(numbers) if n != 0), len(numbers) - 1)
            else:
                index = 0 if len(numbers) == 1 else 1
            upper = numbers[:index] + [numbers[index] + 1]
            parts.append(f">={'.'.join(map(str, numbers))},<{'.'.join(map(str, upper))}")
        elif re.fullmatch(r"\d+(\.\d+)*(\.\*)?", part):
            parts.append(f"=={part}")
        else:
            parts.append(part.replace(" ", ""))
    return ",".join(parts)


def _workflow_jobs(project: _Project) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, job) of every job in the repository's GitHub Actions workflows."""
    for path in project.listing:
        if not (path.startswith(".github/workflows/") and path.endswith((".yml", ".yaml"))):
            continue
        workflow = _load_yaml_quietly(project.files.read(path))
        jobs = workflow.get("jobs") if isinstance(workflow, dict) else None
        if not isinstance(jobs, dict):
            continue
        for name, job in jobs.items():
            if isinstance(job, dict):
                yield str(name), job
