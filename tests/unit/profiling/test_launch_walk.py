"""The trace reader asks, per kernel, what launched it (trace_reader._Launches): the answer is
kept per span and built from the parent's answer where the span is a named cpu_op. It must
equal the full walk up the nesting (`_launch`) for every span: on the real sample's threads and
on a nest with the cases the shortcut must leave to the walk."""

from __future__ import annotations

import pytest

from cannbot_prefetch.profiling.trace_events import Event, load_trace, threads
from cannbot_prefetch.profiling.trace_reader import _launch, _Launches

CPU = ("cpu_op", "python_function")


def _every_span_agrees(by_thread: dict) -> int:
    n = 0
    for spans in by_thread.values():
        memo = _Launches(spans, {})
        for k in reversed(range(len(spans))):   # children first: parents get asked later
            assert memo._launch(k) == _launch(spans, k), spans[k].event
            n += 1
    return n


def test_real_sample_every_span(samples):
    path = (samples / "msinsight/pytorch_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
            / "trace_view.json")
    trace = load_trace(path, 1 << 30)
    assert _every_span_agrees(threads(trace.events, lambda e: e.cat in CPU)) > 1000


def _ev(i, cat, name, start, dur, stack=None, dims=None):
    texts = None if stack is None and dims is None else (stack, dims, None, None)
    return Event(i, cat, name, 1, 1, start * 1000, float(dur), texts, None)


@pytest.mark.parametrize("inner_name", ["aclnnMm", None])
def test_nest_with_frames_markers_and_unnamed_ops(inner_name):
    events = [
        _ev(0, "cpu_op", "ProfilerStep#7", 0, 100),
        _ev(1, "python_function", "model.py(3): forward", 1, 90),
        _ev(2, "cpu_op", "aten::linear", 2, 80, dims="1,8;8,8"),
        _ev(3, "cpu_op", inner_name, 3, 10, stack=" ;\r\n ", dims="1,8"),   # joins to nothing
        _ev(4, "cpu_op", "aten::mm", 20, 10, stack="a.py(1): f;\r\nb.py(2): g"),
        _ev(5, "cpu_op", "ProfilerStep#8", 40, 5),                            # nested marker
        _ev(6, "cpu_op", "aclnnAdd", 41, 1),
    ]
    nested = threads(events, lambda e: e.cat in CPU)
    assert _every_span_agrees(nested) == len(events)
    spans = nested[(1, 1)]
    memo = _Launches(spans, {})
    at = {s.event.index: k for k, s in enumerate(spans)}
    assert memo._launch(at[4]) == ("a.py(1): f;b.py(2): g", "aten::mm", None, 7)
    assert memo._launch(at[6])[3] == 7          # the outermost ProfilerStep names the step
