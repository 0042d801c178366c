"""The trace reader asks, per kernel, what launched it (HostThread.launch): each span's answer
is built once from its parent's (trace_reader._answers). It must equal the full walk up the
nesting (`_launch`) for every span: on the real sample's threads and on a nest with frames,
markers, unnamed ops and blank stacks. The nesting itself (HostThread, on the columns) must
equal the Event-based `threads()` the PyTorch reader uses."""

from __future__ import annotations

import json

import pytest

from cannbot_prefetch.profiling.trace_events import join_stack, load_trace, threads
from cannbot_prefetch.profiling.trace_launch import HOST, _launch, host_threads


def _every_span_agrees(trace) -> int:
    n = 0
    for t in host_threads(trace.x).values():
        for k in range(len(t.rows)):
            stack, op, dims, step = t.answer(k)      # dims as written
            assert (stack, op, join_stack(dims), step) == _launch(t, trace.x, k), \
                trace.x.event(t.rows[k])
            n += 1
    return n


def _nesting_matches_threads(trace) -> None:
    """HostThread's order and parents are threads()'s, span for span."""
    by_thread = threads(trace.events, lambda e: e.cat in HOST)
    cols = host_threads(trace.x)
    assert by_thread.keys() == cols.keys()
    for key, spans in by_thread.items():
        t = cols[key]
        assert [trace.x.index[r] for r in t.rows] == [s.event.index for s in spans]
        assert t.parent == [s.parent for s in spans]
        assert t.ends == [s.end for s in spans]


def test_real_sample_every_span(samples):
    path = (samples / "msinsight/pytorch_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
            / "trace_view.json")
    trace = load_trace(path, 1 << 30)
    assert _every_span_agrees(trace) > 1000
    _nesting_matches_threads(trace)


def _ev(cat, name, start, dur, stack=None, dims=None):
    args = {k: v for k, v in (("Call stack", stack), ("Input Dims", dims)) if v is not None}
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": f"{start}.000",
            "dur": dur, "args": args}


@pytest.mark.parametrize("inner_name", ["aclnnMm", None])
def test_nest_with_frames_markers_and_unnamed_ops(tmp_path, inner_name):
    # GENERATED: a hand-written host thread (file order = event index)
    events = [
        _ev("cpu_op", "ProfilerStep#7", 0, 100),
        _ev("python_function", "model.py(3): forward", 1, 90),
        _ev("cpu_op", "aten::linear", 2, 80, dims="1,8;8,8"),
        _ev("cpu_op", inner_name, 3, 10, stack=" ;\r\n ", dims="1,8"),   # joins to nothing
        _ev("cpu_op", "aten::mm", 20, 10, stack="a.py(1): f;\r\nb.py(2): g"),
        _ev("cpu_op", "ProfilerStep#8", 40, 5),                            # nested marker
        _ev("cpu_op", "aclnnAdd", 41, 1),
        _ev("cpu_op", "same start, shorter", 41, 0.5),                     # ties sort by end
        _ev("cpu_op", None, 95, 4, dims="9,9"),          # unnamed, no named op above it
        _ev("cpu_op", None, 96, 1, dims="7,7"),          # unnamed inside unnamed
    ]
    f = tmp_path / "trace_view.json"
    f.write_text(json.dumps(events), encoding="utf-8")
    trace = load_trace(f, 1 << 30)
    assert _every_span_agrees(trace) == len(events)
    _nesting_matches_threads(trace)
    t = host_threads(trace.x)[(1, 1)]
    at = {trace.x.index[r]: k for k, r in enumerate(t.rows)}
    assert t.answer(at[4]) == ("a.py(1): f;b.py(2): g", "aten::mm", None, 7)
    assert t.answer(at[6])[3] == 7              # the outermost ProfilerStep names the step
    assert t.answer(at[3])[0] == "model.py(3): forward"   # no stack: the python frames
    assert t.parent[at[7]] == at[6]             # inside the longer op of the same start
    assert t.launch(41_200)[1] == "same start, shorter"
    assert t.launch(41_700)[1] == "aclnnAdd"    # after the inner one ended
    assert t.launch(200_000) == (None, None, None, None)    # outside every span
    assert t.answer(at[9])[1:] == (None, "9,9", 7)   # the outermost unnamed op's dims
