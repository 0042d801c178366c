"""Bounds of the plan grammar and validation pinned at their edges (issue 34 part 4: a hand
mutation run left the path-length bound of contract/grammar.py (then plan/grammar.py) and the open lower bounds of
plan/validate.py unkilled). Values at and beside each bound, worked out from the bounds
themselves: MAX_PATH_PARTS = 32 parts; dtype_bytes and coefficient in (0, ...]."""

from __future__ import annotations

import pytest
import yaml

from cannbot_prefetch.errors import PlanError
from cannbot_prefetch.plan import Plan, dump_plan, grammar, plan_from_dict

from test_plan import _site


def _name(parts: int) -> str:
    return ".".join(f"a{i}" for i in range(parts))


def test_a_dotted_path_takes_32_parts_and_no_more():
    assert grammar.MAX_PATH_PARTS == 32
    assert grammar.is_dotted(_name(32)) and not grammar.is_dotted(_name(33))
    assert grammar.access_steps(_name(32)) == [f"a{i}" for i in range(32)]
    assert grammar.access_steps(_name(33)) is None
    assert grammar.access_steps(_name(31) + "[0]") is not None     # an index is a step too
    assert grammar.access_steps(_name(32) + "[0]") is None
    assert grammar.is_access_path(_name(2), min_parts=2)
    assert not grammar.is_access_path(_name(1), min_parts=2)


@pytest.mark.parametrize("key, value, ok", [
    ("dtype_bytes", 0, False), ("dtype_bytes", 1, True), ("dtype_bytes", 64, True),
    ("dtype_bytes", 65, False),
    ("coefficient", 0, False), ("coefficient", 1e-9, True), ("coefficient", 1, True),
    ("coefficient", 1.01, False),
])
def test_basis_bounds_are_open_at_zero(key, value, ok):
    data = yaml.safe_load(dump_plan(Plan(sites=(_site(),))))
    data["sites"][0]["basis"][key] = value
    if ok:
        assert getattr(plan_from_dict(data).sites[0].basis, key) == value
    else:
        with pytest.raises(PlanError, match=rf"'sites\[0\]\.basis\.{key}'"):
            plan_from_dict(data)
