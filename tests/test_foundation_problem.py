"""Problem keys and options."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, strategies as st

from nvmathpy.errors import InvalidOptionError
from nvmathpy.plan import Problem, as_options
from nvmathpy.plan.options import check_choice

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=5))
def test_problem_json_round_trip_and_hash(fields):
    p = Problem.of("op", **fields)
    q = Problem.from_json(p.to_json())
    assert p == q and hash(p) == hash(q) and p.digest() == q.digest()


def test_problem_order_independent_and_distinct():
    assert Problem.of("mm", m=1, n=2) == Problem.of("mm", n=2, m=1)
    assert Problem.of("mm", m=1, n=2) != Problem.of("mm", m=2, n=1)
    assert Problem.of("mm", m=1) != Problem.of("fft", m=1)
    assert Problem.of("mm", shape=[3, 4]).get("shape") == [3, 4]


def test_problem_rejects_non_json_values():
    with pytest.raises(TypeError, match="JSON-like"):
        Problem.of("mm", dtype=object())


@dataclass(frozen=True)
class Opts:
    effort: str = "estimate"
    repeats: int = 3

    def __post_init__(self):
        check_choice("Opts", "effort", self.effort, ("estimate", "measure"))


def test_options_from_none_dict_instance():
    assert as_options(None, Opts) == Opts()
    assert as_options({"repeats": 5}, Opts) == Opts(repeats=5)
    o = Opts(effort="measure")
    assert as_options(o, Opts) is o


def test_options_errors_name_the_bad_value():
    with pytest.raises(InvalidOptionError, match="unknown key 'repeat'.*allowed: \\['effort', 'repeats'\\]"):
        as_options({"repeat": 5}, Opts)
    with pytest.raises(InvalidOptionError, match="effort='x' is not allowed"):
        as_options({"effort": "x"}, Opts)
    with pytest.raises(InvalidOptionError, match="must be None, a dict or a Opts"):
        as_options(3, Opts)
