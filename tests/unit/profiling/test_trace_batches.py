"""A trace read in many pieces and batches (trace_events.load_trace) stages its values and
converts every timestamp in one call of the rule at the end: the values come out as worked by
hand, a flow id started again in a later batch keeps its later start, damage in a later batch is
still flagged on its own event, and the rule runs once per read however many batches there are
(a call per batch cost ~0.5 ms of polars set-up each: 72 calls on a 480-step trace).

The events are GENERATED (hand-written in the Ascend trace_view spelling: ts as decimal µs text,
flow starts `ph: s` of category `async_npu`); the expected ns are µs x 1000 worked by hand.
"""

from __future__ import annotations

import json

from cannbot_prefetch.profiling import trace_decode, trace_events
from cannbot_prefetch.profiling.trace_events import load_trace

CAP = 1 << 31

# GENERATED: one Ascend process, kernels on one stream, flows from two launching threads.
EVENTS = [
    {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "Ascend Hardware"}},
    {"ph": "s", "cat": "async_npu", "id": 5, "pid": 1, "tid": 2, "ts": "1000.500"},
    {"ph": "X", "name": "k0", "pid": 7, "tid": 3, "ts": "1000.001", "dur": "1.5"},
    {"ph": "s", "cat": "async_npu", "id": 6, "pid": 1, "tid": 2, "ts": "soon"},
    {"ph": "X", "name": "k1", "pid": 7, "tid": 3, "ts": "1002.0004", "dur": "2"},
    {"ph": "X", "name": "k2", "pid": 7, "tid": 3, "ts": "1003.0005", "dur": "-1"},
    {"ph": "s", "cat": "async_npu", "id": 7, "pid": 1, "tid": 2, "ts": 1004},
    {"ph": "X", "name": "k3", "pid": 7, "tid": 3, "ts": "later", "dur": "3"},
    {"ph": "s", "cat": "async_npu", "id": 5, "pid": 1, "tid": 9, "ts": "1005.25\t"},
    {"ph": "X", "name": "k4", "pid": 7, "tid": 3, "ts": 1006, "dur": 0.25},
]

# (name, start ns, dur µs, bad), by hand: 1000.001 µs = 1_000_001 ns; 1002.0004 -> 1_002_000
# (.4 ns rounds down); 1003.0005 -> 1_003_000 (half to even); an int ts 1006 µs -> 1_006_000.
WANT_X = [("k0", 1_000_001, 1.5, None), ("k1", 1_002_000, 2.0, None),
          ("k2", 1_003_000, None, "no valid dur"), ("k3", None, 3.0, "no valid ts"),
          ("k4", 1_006_000, 0.25, None)]
# flow 5 started again from thread (1, 9) later in the file: the later start wins; flow 6 has
# no usable ts and is not kept; the int ts 1004 µs is 1_004_000 ns.
WANT_FLOWS = {5: ((1, 9), 1_005_250), 7: ((1, 2), 1_004_000)}


def test_many_batches_give_the_hand_worked_values_and_convert_once(tmp_path, monkeypatch):
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(EVENTS), encoding="utf-8")
    monkeypatch.setattr(trace_decode, "_CHUNK", 64)          # about one event per piece
    monkeypatch.setattr(trace_events, "_BATCH_PIECES", 2)    # several batches
    stages, rules = [], []
    real_stage, real_rule = trace_events._stage, trace_events.ns_series
    monkeypatch.setattr(trace_events, "_stage", lambda *a: (stages.append(1), real_stage(*a)))
    monkeypatch.setattr(trace_events, "ns_series", lambda t: (rules.append(len(t)), real_rule(t))[1])

    trace = load_trace(path, CAP)

    assert len(stages) >= 3            # the values did wait in several batches
    assert rules == [len(WANT_X) + 4]  # every ts of the read (5 events, 4 flow starts), once
    x = trace.x
    assert list(zip(x.name, x.start, x.dur_us, x.bad)) == WANT_X
    assert trace.flows == WANT_FLOWS
    assert trace.flavour == "ascend"


def test_one_batch_reads_the_same(tmp_path):
    """The same file in one piece and one batch: the same columns and flows."""
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(EVENTS), encoding="utf-8")
    trace = load_trace(path, CAP)
    x = trace.x
    assert list(zip(x.name, x.start, x.dur_us, x.bad)) == WANT_X
    assert trace.flows == WANT_FLOWS
