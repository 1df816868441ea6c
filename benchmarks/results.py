"""Benchmark figures as records, and the tables the documentation shows of them.

Every benchmark script ends with :func:`record`: its figures (what was measured, the value, its
unit, the target when it has one) go to ``benchmarks/results/<benchmark>.json`` with the date and
the machine, newest run first (the last :data:`KEPT_RUNS` runs stay). Nothing types the figures into
the documentation: this module is also an MkDocs hook (``mkdocs.yml``: ``hooks``), which before
every build turns each record into ``docs/benchmarks/<benchmark>.md``, one table per benchmark,
and lists those pages in the site's navigation.

A target is a comparison and a number in the figure's unit (``">= 1000"``, ``"< 5"``); a run meets
it or not, and the table says which.
"""

from __future__ import annotations

import json
import operator
import os
import platform
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DOCS = HERE.parent / "docs" / "benchmarks"
#: real_repos.py records one run per sample (a language, old commits, a repository re-run), and a
#: stop often adds five: twenty keep the previous stops' samples beside the new ones.
KEPT_RUNS = 20
_TARGET = re.compile(r"^\s*(<=|>=|<|>|==)\s*(-?[0-9.]+)\s*$")
_COMPARE = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq}


@dataclass(frozen=True)
class Figure:
    """One measured figure of a run."""

    figure: str
    value: float | int | str
    unit: str = ""
    target: str | None = None  #: ``"<op> <number>"`` in ``unit``

    def met(self) -> bool | None:
        """Whether the value meets the target (None: no target, or a value that is not a number)."""
        match = _TARGET.match(self.target or "")
        if not match or not isinstance(self.value, int | float):
            return None
        return _COMPARE[match.group(1)](self.value, float(match.group(2)))


def machine(note: str = "") -> dict:
    """This machine as a run records it: cores, load average, platform, Python, and a note."""
    try:
        load = round(os.getloadavg()[0], 1)
    except OSError:
        load = None
    return {"cpus": os.cpu_count(), "load_1min": load, "platform": platform.platform(terse=True),
            "python": platform.python_version(), **({"note": note} if note else {})}


def record(benchmark: str, figures: list[Figure], *, note: str = "", results: Path = RESULTS) -> Path:
    """Add a run of ``benchmark`` (today, this machine, ``figures``) to its record; returns the file."""
    path = results / f"{benchmark}.json"
    document = json.loads(path.read_text()) if path.is_file() else {"benchmark": benchmark, "runs": []}
    run = {"date": datetime.now(UTC).date().isoformat(), "machine": machine(note),
           "figures": [asdict(figure) | {"met": figure.met()} for figure in figures]}
    document["runs"] = [run, *document["runs"]][:KEPT_RUNS]
    results.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print(f"figures recorded in {path}")
    if results == RESULTS:
        # The page goes with its record in the same commit: a record added without 'make docs'
        # left a stale table that tests/test_docs.py rejects.
        write_tables()
    return path


def _machine_text(described: dict) -> str:
    parts = [f"{described['cpus']} cores" if described.get("cpus") else ""]
    if described.get("load_1min") is not None:
        parts.append(f"load {described['load_1min']}")
    if described.get("note"):
        parts.append(described["note"])
    return ", ".join(part for part in parts if part)


def _value_text(value: float | int | str, unit: str) -> str:
    if isinstance(value, float):
        value = f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.0f}"
    elif isinstance(value, int):
        value = f"{value:,}"
    return f"{value} {unit}".strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(document: dict, *, script: Path | None = None) -> str:
    """The Markdown page of one benchmark's record: what the script measures, then one table of
    every kept run's figures, newest first."""
    name = document["benchmark"]
    lines = [f"# `{name}`", ""]
    if script is not None and script.is_file():
        summary = _docstring(script)
        if summary:
            lines += [summary, ""]
    lines += [f"Run it with `python benchmarks/{name}.py` (or `make bench`): the run is added to "
              f"`benchmarks/results/{name}.json` and this table is made from that file.", ""]
    runs = document.get("runs", [])
    if not runs:
        return "\n".join(lines + ["No run recorded yet.", ""])
    lines += ["| date | machine | figure | value | target | met |", "|---|---|---|---:|---|---|"]
    for run in runs:
        for figure in run["figures"]:
            met = {True: "yes", False: "**no**", None: ""}[figure.get("met")]
            lines.append(f"| {run['date']} | {_cell(_machine_text(run['machine']))} | {_cell(figure['figure'])} | "
                         f"{_cell(_value_text(figure['value'], figure.get('unit', '')))} | "
                         f"{_cell(figure.get('target') or '')} | {met} |")
    sources = [run for run in runs if run.get("source")]
    if sources:
        lines += ["", "Where the figures come from:", ""]
        lines += [f"- {run['date']} ({_machine_text(run['machine'])}): {run['source']}" for run in sources]
    return "\n".join(lines) + "\n"


def _docstring(script: Path) -> str:
    """The first paragraph of a script's module docstring."""
    import ast

    text = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return " ".join(text.split("\n\n", 1)[0].split())


#: A script's main guard at the start of a line: what makes a module of benchmarks/ a benchmark
#: (``make bench`` greps for the same; the shared modules have none).
_MAIN_GUARD = re.compile(r"^if __name__ == .__main__.:", re.MULTILINE)


def benchmark_scripts(folder: Path = HERE) -> list[Path]:
    """The benchmark scripts, the ones ``make bench`` runs."""
    return sorted(path for path in folder.glob("*.py") if _MAIN_GUARD.search(path.read_text(encoding="utf-8")))


def write_tables(results: Path = RESULTS, docs: Path = DOCS) -> list[Path]:
    """``docs/<benchmark>.md`` for every benchmark script, from its record (written only when it
    changed, so a watching ``mkdocs serve`` does not rebuild forever)."""
    written = []
    docs.mkdir(parents=True, exist_ok=True)
    for script in benchmark_scripts():
        path = results / f"{script.stem}.json"
        document = json.loads(path.read_text()) if path.is_file() else {"benchmark": script.stem, "runs": []}
        page = docs / f"{script.stem}.md"
        text = table(document, script=script)
        if not page.is_file() or page.read_text() != text:
            page.write_text(text)
        written.append(page)
    return written


def on_config(config):
    """MkDocs hook: the nav's Benchmarks section lists a page per benchmark script (a new script
    gets its page without an edit of mkdocs.yml)."""
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and "Benchmarks" in entry:
            entry["Benchmarks"] = ["benchmarks/index.md", *({script.stem: f"benchmarks/{script.stem}.md"}
                                                            for script in benchmark_scripts())]
    return config


def on_pre_build(config) -> None:
    """MkDocs hook: the benchmark tables, before the pages are read."""
    write_tables()
