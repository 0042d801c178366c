"""benchmarks/corpus_sweep.py's per-family limit: --timeout on an idle machine, times the
runnable processes per core on a loaded one, at most MAX_LOAD_SCALE times (a hang still stops).
Loads are set by hand here; the expected limits are the rule worked out by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SWEEP = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus_sweep.py"


@pytest.fixture
def sweep():
    spec = importlib.util.spec_from_file_location("corpus_sweep_under_test", SWEEP)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("load, cores, limit", [
    (0.3, 2, 240.0),     # idle: the base limit, never less
    (5.0, 2, 600.0),     # 2.5 runnable per core
    (9.0, 2, 960.0),     # blt's shared machine (load 8-9 on 2 cores): capped at 4x
    (9.0, 16, 240.0),    # the same load on 16 cores
])
def test_the_limit_scales_with_the_load_per_core(sweep, monkeypatch, load, cores, limit):
    monkeypatch.setattr(sweep.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(sweep.os, "cpu_count", lambda: cores)
    got, scale = sweep.family_limit(240.0)
    assert got == pytest.approx(limit) and scale == pytest.approx(limit / 240.0)


def test_no_load_average_keeps_the_base_limit(sweep, monkeypatch):
    def unavailable():
        raise OSError("no load average")
    monkeypatch.setattr(sweep.os, "getloadavg", unavailable)
    assert sweep.family_limit(240.0) == (240.0, 1.0)
