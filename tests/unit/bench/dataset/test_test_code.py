"""The code string kept for one test of a .py task file (spec thinkingbox-test-functions
§2.3), and which tests run their function."""

from __future__ import annotations

from bench.dataset import parse_py_test_file
from bench.dataset.models import CHECK_CUSTOM, CHECK_DATABASE, CHECK_RUBRICS

# The spec's example file, line for line.
EXAMPLE = '''from thinkingbox.common import Judge, TestContext
"""!
scenario: airline_tau_bench_full
"""
def helper(res):
    assert res["status"] == "cancelled"
def test_a(x, judge):
    """!
    query: cancel my trip
    """
    helper(x.effects["airline_tau_bench"]["reservations"]["Z7GOZK"])
def test_b(x, judge):
    """!
    query: hi
    """
    assert judge.text_yesno(x.response, "Is it a greeting?")'''


def test_the_code_string_blanks_other_tests_and_keeps_line_numbers() -> None:
    cases, problems = parse_py_test_file(EXAMPLE, "airline.py")
    assert problems == []
    by_uid = {c["uid"]: c for c in cases}
    lines = EXAMPLE.split("\n")
    code_a = by_uid["test_a"]["test_code"]
    assert code_a == "\n".join([*lines[:11], "", "", "", "", "", "__tb_test_fn = test_a", ""])
    code_b = by_uid["test_b"]["test_code"]
    assert code_b == "\n".join([*lines[:6], *[""] * 5, *lines[11:16], "__tb_test_fn = test_b", ""])
    # line numbers equal the file's; the call line the runner appends is line N + 3
    assert code_b.split("\n")[15] == lines[15]
    assert (
        len((code_a + "\n__tb_test_reward = __tb_test_fn(**__tb_test_kwargs)").split("\n")) == len(lines) + 3
    )


def test_any_statement_but_the_two_calls_runs_the_function() -> None:
    text = '''"""!
scenario: s
"""
def validate_database(x): pass
def validate_rubrics_yesno(x, judge): pass
def test_native(x, judge):
    """!
    query: q
    """
    validate_database(x)
    validate_rubrics_yesno(x, judge)
def test_one_more_assert(x, judge):
    """!
    query: q
    """
    validate_database(x)
    assert x.response
def test_returns(x, judge):
    """!
    query: q
    """
    return 0.5
'''
    cases, _ = parse_py_test_file(text, "f.py")
    checks = {c["uid"]: c["checks"] for c in cases}
    assert checks == {
        "test_native": [CHECK_DATABASE, CHECK_RUBRICS],
        "test_one_more_assert": [CHECK_DATABASE, CHECK_CUSTOM],
        "test_returns": [CHECK_CUSTOM],
    }
    # helpers stay in every test's code; the other tests are blank
    code = next(c["test_code"] for c in cases if c["uid"] == "test_returns")
    assert "def validate_database(x): pass" in code and "validate_rubrics_yesno(x, judge)\n" not in code
