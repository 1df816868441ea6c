"""Test ids of every odd shape survive the trip through pytest's JUnit XML and its command line.

A real pytest (the host's) collects and runs a suite made of odd ids; each id's outcome read back
from the XML must be its own, and selecting the ids on the command line must run exactly them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repo2env.models import TestStatus
from repo2env.validate.derive import COLLECT_SCRIPT, read_collected_ids
from repo2env.verify.junit import junit_key, junit_keys, outcomes_for, selection_args, split_node_id

# Each parameter is (id-making value, passes?): every shape once passing and once failing, so an id
# that were matched to another test's row would show.
ODD_SUITE = {
    "tests/__init__.py": "",
    "tests/pkg/__init__.py": "",
    "tests/pkg/test_odd.py": '''
        import pytest

        SHAPES = ["a::b", "x/y.z", "a.b::C.d", "with space", "ünï-çødé", "€", "[inner]", "a]b", "a[b",
                  "::", "tab\\there", "new\\nline", "back\\\\slash", "quote'\\"", "x" * 150]

        @pytest.mark.parametrize("shape", SHAPES)
        @pytest.mark.parametrize("passes", [True, False])
        def test_shape(shape, passes):
            assert passes

        @pytest.mark.parametrize("passes", [True, False], ids=["long " + "y" * 400 + " :: ok", "long " + "y" * 400 + " :: ko"])
        def test_long_explicit_id(passes):
            assert passes

        @pytest.mark.parametrize("passes", [True, False], ids=["id with :: and [ and ] pass", "id with :: and [ and ] fail"])
        def test_explicit_ids(passes):
            assert passes

        class TestOuter:
            class TestInner:
                @pytest.mark.parametrize("passes", [True, False], ids=["p::q", "r::s"])
                def test_nested(self, passes):
                    assert passes

            def test_method(self):
                pass
    ''',
    "test_at_root.py": '''
        import pytest

        @pytest.mark.parametrize("passes", [True, False], ids=["root::pass", "root::fail"])
        def test_root(passes):
            assert passes
    ''',
}


def _write_suite(root: Path, files: dict[str, str], ini: str = "") -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    (root / "pytest.ini").write_text(f"[pytest]\n{ini}")


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=root,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)


def _collected(root: Path) -> list[str]:
    """The ids as validation collects them (its collection script, run by the host's Python)."""
    script, ids_path = root.parent / "collect.py", root.parent / "ids.json"
    script.write_text(COLLECT_SCRIPT)
    subprocess.run([sys.executable, str(script), str(ids_path), "--collect-only", "-q", "-p", "no:cacheprovider"],
                   cwd=root, capture_output=True, timeout=120)
    return read_collected_ids(ids_path.read_text(encoding="utf-8"))


def _expected(test_id: str) -> TestStatus:
    passing = ("True" in test_id or "pass" in test_id or ":: ok" in test_id or "p::q" in test_id
               or test_id.endswith("test_method"))
    return TestStatus.PASSED if passing else TestStatus.FAILED


@pytest.mark.parametrize("ini", ["", "disable_test_id_escaping_and_forfeit_all_rights_to_community_support = true\n"],
                         ids=["escaped", "raw-unicode"])
def test_every_odd_id_reads_its_own_outcome(tmp_path, ini):
    tmp_path = tmp_path / "suite"
    _write_suite(tmp_path, ODD_SUITE, ini)
    test_ids = _collected(tmp_path)
    assert len(test_ids) == 2 * 15 + 2 + 2 + 2 + 1 + 2
    assert "tests/pkg/test_odd.py::test_shape[False-a::b]" in test_ids
    assert any(len(test_id) > 400 for test_id in test_ids), "pytest keeps an explicit long id whole"
    xml_path = tmp_path / "report.xml"
    _pytest(tmp_path, f"--junitxml={xml_path}", "-o", "junit_family=xunit2")
    outcomes, error = outcomes_for(test_ids, xml_path.read_text(encoding="utf-8"))
    assert error is None
    wrong = {test_id: status for test_id, status in outcomes.items() if status != _expected(test_id)}
    assert not wrong


def test_selecting_odd_ids_on_the_command_line_runs_exactly_them(tmp_path):
    tmp_path = tmp_path / "suite"
    _write_suite(tmp_path, ODD_SUITE)
    test_ids = _collected(tmp_path)
    chosen = [test_id for test_id in test_ids if "::" in split_node_id(test_id)[2] or " " in test_id
              or "[inner]" in test_id or "test_method" in test_id]
    xml_path = tmp_path / "report.xml"
    run = _pytest(tmp_path, f"--junitxml={xml_path}", "-o", "junit_family=xunit2", *selection_args(chosen))
    assert "not found" not in run.stdout + run.stderr
    outcomes, error = outcomes_for(chosen, xml_path.read_text(encoding="utf-8"))
    assert error is None and all(outcomes[test_id] == _expected(test_id) for test_id in chosen)


def test_node_ids_split_outside_brackets_only():
    assert split_node_id("tests/a.py::T::f[x::y]") == ("tests/a.py", ["T", "f"], "[x::y]")
    assert split_node_id("tests/a.py::f[a[b]") == ("tests/a.py", ["f"], "[a[b]")
    assert split_node_id("README.rst") == ("README.rst", [], "")
    assert junit_key("tests/a.py::T::f[x::y.z/w]") == ("tests.a.T", "f[x::y.z/w]")
    assert junit_key("a.py::f[a.b::C.d]") == ("a", "f[a.b::C.d]")
    assert junit_key("src/pkg/mod.py::pkg.mod.func") == ("src.pkg.mod", "pkg.mod.func"), "a doctest's name keeps its dots"
    assert junit_key("tests/a.py::TestX::()::test_y") == ("tests.a.TestX", "test_y"), "pytest < 7's instance level"
    assert junit_key("tests/a.py::f[bell\x07]") == ("tests.a", "f[bell#x07]"), "as pytest's bin_xml_escape writes it"


def test_a_bracket_in_the_file_path_matches_old_and_new_pytest():
    # pytest 9 ends the path at the first "::"; older releases cut at the first "[" anywhere (and
    # then put the whole address in the name).
    assert junit_keys("tests/test_[x].py::test_y[1]") == [("tests.test_[x]", "test_y[1]"), ("", "tests.test_[x].py::test_y[1]")]
    xml = ('<testsuites><testsuite><testcase classname="" name="tests.test_[x].py::test_y[1]"/>'
           "</testsuite></testsuites>")
    assert outcomes_for(["tests/test_[x].py::test_y[1]"], xml)[0] == {"tests/test_[x].py::test_y[1]": TestStatus.PASSED}


def test_selection_keeps_ids_pytest_before_7_can_select_and_widens_the_others():
    ids = ["t.py::f[a::b]", "t.py::f[c::d]", "t.py::f[plain]", "t.py::T::g[x::y]", "t.py::h"]
    assert selection_args(ids) == ["t.py::f", "t.py::f[plain]", "t.py::T::g", "t.py::h"]
