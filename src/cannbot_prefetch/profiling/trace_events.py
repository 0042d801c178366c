"""Chrome trace events: parsing, sanitizing, and who-encloses-whom per thread.

Shared by the Ascend trace_view reader and the PyTorch trace reader. Timestamps are decimal
µs (strings in Ascend exports, numbers in torch's); the JSON is parsed with floats kept as text
so every digit reaches the ns conversion.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .values import text_to_ns, to_number

STEP_MARKER = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass
class Span:
    start: int
    end: int
    index: int          # position in the event list
    parent: int = -1    # index into the thread's span list


def load_trace_events(path: Path) -> tuple[list[dict], str]:
    """Parse a trace file -> (events, flavour 'ascend' | 'torch'); InputError if not a trace."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            data = json.load(fh, parse_float=str)  # keep every digit of µs timestamps
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"cannot read ({getattr(exc, 'strerror', None) or exc})",
                         path=str(path)) from None
    except ValueError as exc:
        raise InputError(f"not valid JSON ({exc})", path=str(path)) from None
    if isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        events, flavour = data["traceEvents"], "torch"
    elif isinstance(data, list):
        events, flavour = data, "ascend"
    else:
        raise InputError("JSON is not a Chrome trace (no event list or traceEvents)", path=str(path))
    events = [c for c in (_sanitize(e) for e in events) if c is not None]
    if not any(e.get("ph") == "X" for e in events):
        raise InputError("trace holds no complete ('X') events", path=str(path))
    if "Ascend Hardware" in process_names(events).values():
        flavour = "ascend"
    return events, flavour


def _sanitize(event) -> dict | None:
    """An event with the fields this reader uses in usable types (hand-edited or damaged
    traces put lists where ids belong); anything else is ignored."""
    if not isinstance(event, dict):
        return None
    out = dict(event)
    for key in ("pid", "tid"):
        if not isinstance(out.get(key), (int, str)) or isinstance(out.get(key), bool):
            out[key] = None
    for key in ("name", "cat", "ph"):
        if not isinstance(out.get(key), str):
            out[key] = None
    if not isinstance(out.get("args"), dict):
        out["args"] = {}
    return out


def process_names(events: list[dict]) -> dict:
    return {e.get("pid"): e["args"].get("name") for e in events
            if e.get("ph") == "M" and e.get("name") == "process_name"
            and isinstance(e["args"].get("name"), str)}


def span(e: dict, i: int) -> Span | None:
    start = text_to_ns(e.get("ts"))
    dur = to_number(e.get("dur"))
    if start is None or dur is None or dur < 0:
        return None
    return Span(start, start + round(dur * 1000), i)


def nest(spans: list[Span]) -> list[Span]:
    """Sort one thread's spans and set each span's parent (the innermost span enclosing it)."""
    spans.sort(key=lambda s: (s.start, -s.end))
    stack: list[int] = []
    for k, s in enumerate(spans):
        while stack and spans[stack[-1]].end < s.end:
            stack.pop()
        s.parent = stack[-1] if stack else -1
        stack.append(k)
    return spans


def enclosing(spans: list[Span], starts: list[int], ts: int) -> list[Span]:
    """Spans that contain time `ts`, innermost first."""
    k = bisect.bisect_right(starts, ts) - 1
    while k >= 0 and spans[k].end < ts:
        k = spans[k].parent
    out = []
    while k >= 0:
        out.append(spans[k])
        k = spans[k].parent
    return out


def threads(events: list[dict], keep) -> dict:
    """(pid, tid) -> nested spans of the events `keep(e)` accepts."""
    by_thread: dict = {}
    for i, e in enumerate(events):
        if e.get("ph") == "X" and keep(e):
            s = span(e, i)
            if s is not None:
                by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(s)
    return {k: nest(v) for k, v in by_thread.items()}


def join_stack(text: str | None) -> str | None:
    """`a(1): f;\\r\\nb(2): g` -> `a(1): f;b(2): g`."""
    if not text:
        return None
    frames = [f.strip() for f in str(text).replace("\r", "").split(";")]
    frames = [f for f in frames if f]
    return ";".join(frames) or None
