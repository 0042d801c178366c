"""The whole-file msgspec decode (trace_decode.py) and the streaming stdlib reader must give
load_trace the same Trace on every input: real exports, the bundled examples, and small
GENERATED traces (labelled below) with the value spellings and damage the readers handle.
Where msgspec refuses an input, the streaming reader must be the one that answers."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from cannbot_prefetch.errors import InputError
from cannbot_prefetch.profiling import trace_decode
from cannbot_prefetch.profiling.trace_events import load_trace

REPO = Path(__file__).resolve().parents[3]
CAP = 1 << 31


def _both(path: Path, monkeypatch) -> tuple:
    """(trace as load_trace reads it, trace by the streaming reader alone, whether the first
    read never needed the streaming reader)."""
    streamed = []
    real = trace_decode._streamed

    def spy(*a):
        streamed.append(a)
        return real(*a)
    with monkeypatch.context() as m:
        m.setattr(trace_decode, "_streamed", spy)
        fast = load_trace(path, CAP)
    with monkeypatch.context() as m:
        m.setattr(trace_decode, "_head", lambda *a: b"")
        slow = load_trace(path, CAP)
    return fast, slow, not streamed


def _same(a, b) -> None:
    assert (a.flavour, a.procs, a.thread_names, a.flows) == \
           (b.flavour, b.procs, b.thread_names, b.flows)
    assert len(a.events) == len(b.events)
    assert a.events == b.events


def _real_traces(samples: Path) -> list[Path]:
    found = [samples / "mstt/advisor_timeline_advice/trace_view.json",
             samples / "msinsight/pytorch_text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
                       "/trace_view.json"]
    found += sorted(REPO.glob("examples/*/profile*/*_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                              "trace_view.json"))
    return found


@pytest.mark.samples
@pytest.mark.parametrize("chunk", [None, 333], ids=["1 MiB pieces", "333-byte pieces"])
def test_real_and_example_traces_decode_alike(samples, monkeypatch, chunk):
    """Tiny pieces cut the list at every separator spelling the exporters write."""
    if chunk:
        monkeypatch.setattr(trace_decode, "_CHUNK", chunk)
    paths = _real_traces(samples)
    assert len(paths) >= 4
    for path in paths:
        fast, slow, took = _both(path, monkeypatch)
        assert took, path
        _same(fast, slow)
        assert fast.events


def test_torch_trace_decodes_alike(tmp_path, monkeypatch):
    """The bundled H200 torch trace, unzipped (the .gz itself always streams)."""
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((REPO / "examples/h200-llama3.2-1b-cuda/trace.json.gz")
                                      .read_bytes()))
    fast, slow, took = _both(plain, monkeypatch)
    assert took and fast.flavour == "torch"
    _same(fast, slow)
    gz_fast, _, gz_took = _both(REPO / "examples/h200-llama3.2-1b-cuda/trace.json.gz",
                                monkeypatch)
    assert not gz_took
    _same(gz_fast, fast)


# GENERATED: hand-written events with the spellings both exporters use and the damage the
# readers count (see trace_events.load_trace / _event).
_EVENTS = [
    {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "Ascend Hardware"}},
    {"ph": "M", "name": "thread_name", "pid": 7, "tid": "s1", "args": {"name": 3}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2,
     "ts": "@1736408883716197.363", "dur": 12.5,
     "args": {"Call stack": "a.py(1): f;\r\nb.py(2): g", "Input Dims": [[8, 2048], [2048, 512]],
              "Input type": ["c10::BFloat16", "float"], "External id": 41, "other": [1.5]}},
    {"ph": "X", "name": "MatMulV3", "pid": 7, "tid": "s1", "ts": "1736408883716199.001",
     "dur": "3.25", "args": {"Task Id": "9", "Stream Id": 2, "Physic Stream Id": None,
                             "Model Id": 4294967295, "Task Type": "AI_CORE"}},
    {"ph": "X", "name": "k", "pid": 7, "tid": "s1", "ts": 17364088837162, "dur": 10**400 // 10**398},
    {"ph": "X", "name": "bad ts", "pid": 7, "ts": "soon", "dur": 1},
    {"ph": "X", "name": "bad dur", "pid": 7, "ts": "1.5", "dur": -1},
    {"ph": "X", "name": "", "cat": ["x"], "pid": [1], "tid": 1.5, "ts": 2, "dur": "@1e400"},
    {"ph": "X", "cat": "enqueue", "name": "skipped", "ts": 1, "dur": 1},
    {"ph": "X", "cat": "Trace", "name": "ProfilerStep#3", "ts": "10.000", "dur": "99.5"},
    {"ph": "s", "cat": "async_npu", "id": 1736408883716199001, "pid": 1, "tid": 2,
     "ts": "1736408883716197.400"},
    {"ph": "s", "cat": "async_npu", "id": "x", "pid": 1, "tid": 2, "ts": "1"},
    {"ph": "X", "name": "big", "pid": 7, "ts": 123456789012345678901234567890, "dur": 1},
    {"ph": "X", "name": "args empty", "pid": 7, "ts": "3", "dur": 1, "args": {}},
    {"ph": "X", "name": "args null", "pid": 7, "ts": "3", "dur": 1, "args": None,
     "ph2": {"nested": [1, {"a": 2.5}]}},
]


def _dumps(doc) -> str:
    """JSON text, with "@literal" strings written as bare number literals (1e400)."""
    return re.sub(r'"@([^"]*)"', r"\1", json.dumps(doc))


@pytest.mark.parametrize("shape", ["list", "object"])
def test_generated_spellings_decode_alike(tmp_path, monkeypatch, shape):
    doc = _EVENTS if shape == "list" else {"traceEvents": _EVENTS, "deviceProperties": [{}],
                                           "schemaVersion": 1.0}
    f = tmp_path / "trace.json"
    f.write_text(_dumps(doc), encoding="utf-8")
    fast, slow, took = _both(f, monkeypatch)
    assert took
    _same(fast, slow)
    assert sum(e.bad is not None for e in fast.events) == 4
    mm = next(e for e in fast.events if e.name == "aten::mm")
    assert mm.start == 1736408883716197363            # every digit of the float literal
    assert mm.arg("Input Dims") == "8,2048;2048,512" and mm.arg("External id") == 41


@pytest.mark.parametrize("damage", [
    lambda t: "\ufeff" + t,                                   # BOM
    lambda t: t.replace('"dur": 12.5', '"dur": NaN'),         # a constant JSON does not allow
    lambda t: t.replace('[{"ph": "M"', '[7, {"ph": "M"', 1),  # an element that is no event
    lambda t: t.replace('"args": {}', '"args": []'),          # args that are no object
    lambda t: t.replace('"a.py(1)', '"\\ud800a.py(1)'),       # a lone surrogate escape
], ids=["bom", "nan", "non-object event", "args list", "lone surrogate"])
def test_what_msgspec_refuses_streams(tmp_path, monkeypatch, damage):
    f = tmp_path / "trace.json"
    f.write_text(damage(_dumps(_EVENTS)), encoding="utf-8")
    fast, slow, took = _both(f, monkeypatch)
    assert not took
    _same(fast, slow)


@pytest.mark.parametrize("shape", ["list", "object"])
def test_nesting_beyond_msgspec_streams(tmp_path, shape):
    """msgspec raises RecursionError on deep nesting: the streaming reader must answer, with
    its own one-line refusal (the fuzz suite's hostile case)."""
    deep = "[" * 100_000 + "]" * 100_000
    event = '{"ph": "X", "name": "k", "ts": "1", "dur": 1, "args": {"x": %s}}' % deep
    text = f"[{event}]" if shape == "list" else f'{{"traceEvents": [{event}]}}'
    f = tmp_path / "trace.json"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match="nest"):
        load_trace(f, CAP)


def test_refusals_keep_the_streaming_messages(tmp_path):
    f = tmp_path / "trace.json"
    f.write_text(json.dumps(_EVENTS) + " []", encoding="utf-8")
    with pytest.raises(InputError, match="extra data"):
        load_trace(f, CAP)
    f.write_text(json.dumps({"other": []}), encoding="utf-8")
    with pytest.raises(InputError, match="traceEvents"):
        load_trace(f, CAP)
    f.write_text(json.dumps(_EVENTS), encoding="utf-8")
    with pytest.raises(InputError, match="larger than"):
        load_trace(f, 100)          # the cap holds before anything is read whole


def test_streaming_takes_over_mid_file(tmp_path, monkeypatch):
    """A piece msgspec refuses after others were used: the streaming reader continues at the
    same event, and the whole equals a streamed read."""
    monkeypatch.setattr(trace_decode, "_CHUNK", 200)
    events = _EVENTS * 3 + [{"ph": "X", "name": "last", "pid": 7, "ts": "1", "dur": "@NaN"}]
    f = tmp_path / "trace.json"
    f.write_text(_dumps(events), encoding="utf-8")
    pieces = []
    real = trace_decode._LIST

    class Counting:
        def decode(self, data):
            pieces.append(len(data))
            return real.decode(data)
    monkeypatch.setattr(trace_decode, "_LIST", Counting())
    fast, slow, took = _both(f, monkeypatch)
    assert not took and len(pieces) > 3      # several pieces decoded before the takeover
    _same(fast, slow)
    assert fast.events[-1].name == "last" and fast.events[-1].bad == "no valid dur"


def test_records_are_left_to_reference_counting():
    """Records hold decoded JSON values only, so the cyclic collector need not track the 10^5
    of them a trace holds (trace_decode: `gc=False`); both decoders and the streamed form
    give untracked records, their args too."""
    import gc

    # a list in a record and in its args: a value the collector would otherwise track
    raw = _dumps([{"ph": "X", "name": "k", "pid": 1, "tid": 2, "ts": "1.000", "dur": 2.5,
                   "cat": ["not", "text"],
                   "args": {"Call stack": "a.py(1): f", "Input Dims": [[1, 2]]}}])
    listed = trace_decode._LIST.decode(raw.encode())
    whole = trace_decode._OBJECT.decode(('{"traceEvents": ' + raw + "}").encode()).traceEvents
    streamed = [trace_decode.from_dict(json.loads(raw)[0])]
    for recs in (listed, whole, streamed):
        (rec,) = recs
        assert rec.cat == ["not", "text"] and rec.args.a1 == [[1, 2]]
        assert not gc.is_tracked(rec) and not gc.is_tracked(rec.args)
