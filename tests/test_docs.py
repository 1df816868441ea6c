"""The documentation site builds without a warning, every CLI command has a reference page, and the
benchmark tables are the ones the benchmark records give."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
mkdocs = pytest.importorskip("mkdocs", reason="the docs extra is not installed") if not os.environ.get("CI") \
    else __import__("mkdocs")


def command_paths(command: click.Command, path: tuple[str, ...] = ("repo2env",)) -> list[tuple[str, ...]]:
    """Every command of the CLI by its path (``("repo2env", "export", "harbor")``), groups included."""
    found = [path]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += command_paths(sub, (*path, name))
    return found


def test_the_benchmark_pages_are_the_records_tables():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import results
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    import json

    for script in results.benchmark_scripts():
        record = ROOT / "benchmarks" / "results" / f"{script.stem}.json"
        document = json.loads(record.read_text()) if record.is_file() else {"benchmark": script.stem, "runs": []}
        page = ROOT / "docs" / "benchmarks" / f"{script.stem}.md"
        assert page.is_file(), f"no page for {script.name}: run 'make docs'"
        assert page.read_text() == results.table(document, script=script), \
            f"{page} is not {record.name}'s table: run 'make docs' (the pages are generated, never edited)"
        for run in document["runs"]:
            assert run["date"] and run["machine"] and run["figures"], f"{record}: a run without date, machine or figures"


@pytest.mark.slow
def test_the_site_builds_without_warnings_and_every_command_has_a_page(tmp_path):
    from repo2env.cli import cli

    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                           capture_output=True, text=True, timeout=600,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    headings: set[str] = set()
    for page in (site / "reference" / "cli").rglob("index.html"):
        headings |= set(re.findall(r'<h[1-6][^>]* id="([^"]+)"', page.read_text(encoding="utf-8")))
    missing = [" ".join(path) for path in command_paths(cli)[1:] if "-".join(path) not in headings]
    assert not missing, f"commands without a page in docs/reference/cli/: {missing}"
    for page in ("reference/api/models", "reference/api/compose", "reference/api/envs", "reference/api/sandbox",
                 "reference/api/publish", "benchmarks/pipeline"):
        assert (site / page / "index.html").is_file(), page
    api = (site / "reference" / "api" / "envs" / "index.html").read_text(encoding="utf-8")
    assert "get_reward" in api and "str_replace" in api, "the API reference is made from the docstrings"
