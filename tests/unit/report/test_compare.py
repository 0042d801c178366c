"""report/measure.py on GENERATED profiles: matching, per-step statistics, critical path,
side streams, L2 hit rates."""

from __future__ import annotations

import polars as pl
import pytest
from profgen import Variant, write_plan, write_profile

from cannbot_prefetch.plan import load_plan
from cannbot_prefetch.profiling.companions import read_l2_cache, read_step_times
from cannbot_prefetch.report.measure import measure_profile
from cannbot_prefetch.report.measurements import Stat
from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.profiling.table import KernelTable, Profile
from cannbot_prefetch.policy import Policy
POLICY = Policy.load()   # the shipped thresholds, as an analysis passes them down


def _measure(tmp_path, variant=Variant(), companions=True, plan_kw=None, **kw):
    tmp_path.mkdir(parents=True, exist_ok=True)
    plan = load_plan(write_plan(tmp_path, **(plan_kw or {})))
    prof = load_profile(write_profile(tmp_path / "p", variant, **kw))
    root = prof.extras["root"]
    st = read_step_times(root) if companions else None
    l2 = read_l2_cache(root) if companions else None
    return measure_profile(prof, plan, "baseline", step_times=st, l2_cache=l2, policy=POLICY), prof, plan


def test_stat_mean_and_sample_stdev():
    s = Stat.of([1.0, 2.0, 3.0, None])
    assert (s.mean, s.n, s.min, s.max) == (2.0, 3, 1.0, 3.0)
    assert s.stdev == pytest.approx(1.0)
    assert Stat.of([]) is None
    assert Stat.of([5.0]).stdev == 0.0


def test_target_and_window_per_step_warmup_excluded(tmp_path):
    m, prof, _ = _measure(tmp_path, steps=6, layers=4)
    assert m.steps == (2, 3, 4, 5, 6) and m.warmup_excluded == (1,)
    s = m.sites[0]
    assert s.found and s.matched_by == "signature" and s.stream == "2"
    assert s.instances == 20 and s.per_step == 4.0
    assert s.target.n == 5 and s.target.mean == pytest.approx(40.0, rel=0.01)
    assert 0 < s.target.stdev < 0.5
    assert s.target_total.mean == pytest.approx(160.0, rel=0.01)
    assert s.window.mean == pytest.approx(8.0, rel=0.02)        # Add 2 + RmsNorm 6
    assert sorted(s.window_ops) == ["Add", "RmsNorm"]
    assert s.window_gap.mean == pytest.approx(10.0, rel=0.02)    # 2 + 1 + 6 + 1 µs
    assert m.step_time_source.startswith("step_trace_time.csv")
    assert m.compute_stream == "2"


def test_step_time_from_kernel_spans_without_step_trace(tmp_path):
    a, _, _ = _measure(tmp_path / "a")
    b, _, _ = _measure(tmp_path / "b", step_trace=False)
    assert b.step_time_source.startswith("kernel spans per step")
    assert b.step_time.mean == pytest.approx(a.step_time.mean, rel=0.01)


def test_no_steps_uses_instances_and_the_compute_stream_span(tmp_path):
    _, prof, plan = _measure(tmp_path)
    df = prof.table.df.with_columns(pl.lit(None, dtype=pl.Int64).alias("step"))
    m = measure_profile(Profile(KernelTable(df), prof.info), plan, "x", policy=POLICY)
    s = m.sites[0]
    assert s.target.unit == "instance" and s.target.n == s.instances == 20
    assert m.step_time_source.startswith("span of the compute stream")
    assert any("no step ids" in n for n in m.notes)


def test_signature_not_in_profile(tmp_path):
    m, _, _ = _measure(tmp_path, plan_kw={"shapes": "3,5;7,5"})
    assert not m.sites[0].found and "no kernel" in m.sites[0].note


def test_shared_signature_is_narrowed_by_the_window(tmp_path):
    # gate_proj and up_proj share a signature; the plan's window (Add, RmsNorm) precedes gate only
    m, _, _ = _measure(tmp_path, Variant(twin=True))
    s = m.sites[0]
    assert s.per_step == 4 and s.target.mean == pytest.approx(40.0, rel=0.01)   # not the 55 µs twin
    assert "follow the window ops" in s.note


@pytest.mark.parametrize("cluster, mean_us", [(0, 40.0), (1, 55.0)])
def test_shared_signature_follows_the_plans_call_site(tmp_path, cluster, mean_us):
    # gate (40 µs) and its 55 µs twin share a signature; the plan names its call site the way
    # analyze's attribution numbers them (windows.call_sites: first seen first). The window ops
    # (Silu) precede only the twin, so guessing by them would measure the twin for cluster 0.
    m, _, _ = _measure(tmp_path, Variant(twin=True),
                       plan_kw={"window_ops": ("Silu",), "call_site": (cluster, 2)})
    s = m.sites[0]
    assert s.per_step == 4 and s.target.mean == pytest.approx(mean_us, rel=0.01)
    assert f"call site {cluster + 1} of 2" in s.note


def test_side_stream_cmo_tasks_and_tail(tmp_path):
    m, _, _ = _measure(tmp_path, Variant(target_factor=0.8, cmo_us=10, cmo_tail_us=40))
    side = {s.stream: s for s in m.streams}["7"]
    assert side.cmo_kernels == 5 * 5     # 4 per layer + 1 tail, 5 kept steps
    assert side.tail_us == pytest.approx(35.0, abs=1.5)


def test_l2_hit_rate_of_the_target_by_stream_and_task(tmp_path):
    m, _, _ = _measure(tmp_path, l2_hit=0.8)
    assert m.sites[0].l2_hit_rate == pytest.approx(0.8)
    assert "task id" in m.sites[0].l2_source
    assert m.l2_hit_rate is not None


def test_signatures_fingerprint_the_model(tmp_path):
    a, _, _ = _measure(tmp_path / "a")
    b, _, _ = _measure(tmp_path / "b", Variant(other_model=True))
    assert a.signatures != b.signatures and a.signatures & b.signatures
