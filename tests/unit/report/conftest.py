"""Fixtures for the report tests: GENERATED baseline/optimized profile pairs (profgen.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from profgen import Variant, write_plan, write_profile  # noqa: E402


def build(tmp: Path, optimized: Variant | None, *, verify=None, base_kw=None, opt_kw=None, **plan_kw):
    """ReportData for a generated pair (optimized None: baseline-only)."""
    from cannbot_prefetch import hardware
    from cannbot_prefetch.plan import load_plan
    from cannbot_prefetch.profiling.companions import read_l2_cache, read_step_times
    from cannbot_prefetch.profiling.load import load_profile
    from cannbot_prefetch.report import build_report
    from cannbot_prefetch.policy import Policy

    plan_path = write_plan(tmp, **plan_kw)
    a = load_profile(write_profile(tmp / "a", **(base_kw or {})))
    b = load_profile(write_profile(tmp / "b", optimized, seed=2, **(opt_kw or {}))) if optimized else None
    comps = {k: {"step_times": read_step_times(p.extras["root"]), "l2_cache": read_l2_cache(p.extras["root"])}
             for k, p in (("baseline", a), ("optimized", b)) if p is not None}
    return build_report(load_plan(plan_path), str(plan_path), a, b,
                        hardware=hardware.resolve(None, a.info), verify=verify, policy=Policy.load(),
                        companions=comps)


@pytest.fixture
def make_report(tmp_path):
    def _make(optimized: Variant | None, **kw):
        return build(tmp_path, optimized, **kw)
    return _make
