"""What launched a kernel, from the host side of an Ascend trace: each host thread's cpu_op /
python_function spans nested (HostThread), and per span what a kernel launched inside it would
be attributed to: the innermost named cpu_op and its input dims, the nearest `Call stack` (else
the python_function frames), the outermost `ProfilerStep#N`. `_launch` is the definition, a
walk up the nesting; `_answers` builds the same answer once per span from its parent's and is
tested equal to it on every span (tests/unit/profiling/test_launch_walk.py).
"""

from __future__ import annotations

import bisect
from itertools import compress, repeat
from operator import add, mul, neg

from .trace_events import STEP_MARKER, Columns, join_stack
from .trace_values import text_arg

HOST = ("cpu_op", "python_function")
_HOST = frozenset(HOST)


class HostThread:
    """One host thread's usable cpu_op / python_function events, nested: `rows` (into the
    trace's Columns) sorted by (start, -end), file order on ties, with their starts, ends,
    `parent` (the position of the innermost span enclosing each, -1: none) and what each span
    says about a kernel launched inside it (`_answers`)."""

    __slots__ = ("rows", "starts", "ends", "parent", "answers")

    def __init__(self, keyed: list[tuple[int, int, int]], x: Columns, markers: dict):
        keyed.sort()                                   # (start, -end, row)
        starts, ends, rows = zip(*keyed) if keyed else ((), (), ())
        keyed.clear()       # consumed: its 10^4-10^5 tuples gone before the answers are built
        self.rows = list(rows)
        self.starts = list(starts)
        self.ends = ends = list(map(neg, ends))
        parent = [-1] * len(rows)
        stack: list[int] = []
        for k, end in enumerate(ends):
            while stack and ends[stack[-1]] < end:
                stack.pop()
            if stack:
                parent[k] = stack[-1]
            stack.append(k)
        self.parent = parent
        self.answers = _answers(self, x, markers)

    def launch(self, ts: int) -> tuple:
        """(stack, launch op, its input dims as written, step) of a kernel launched at `ts`:
        what the innermost span enclosing ts says (`_launch` walks the same way)."""
        ends, parent = self.ends, self.parent
        k = bisect.bisect_right(self.starts, ts) - 1
        while k >= 0 and ends[k] < ts:
            k = parent[k]
        return self.answer(k)

    def answer(self, k: int) -> tuple:
        """(stack, launch op, its input dims as written, step) inside span k (-1: no span)."""
        if k < 0:
            return NONE4
        stack, op, dims, _, step, frames = self.answers[k]
        if stack is None and frames is not None:
            names = []
            while frames is not None:
                names.append(frames[0])
                frames = frames[1]
            stack = ";".join(names)
        return stack, op, dims, step


NONE4 = (None, None, None, None)
_ROOT = (None, None, None, False, None, None)


def _answers(t: HostThread, x: Columns, markers: dict) -> list[tuple]:
    """Per span, in nesting order (a parent before its children), what the walk up from it
    (`_launch`) finds, built from its parent's answer: (stack from the nearest cpu_op with one,
    launch op and its input dims as written, whether a cpu_op lies on the way, step of the
    outermost ProfilerStep, python_function frames as a linked (name, rest) pair)."""
    names, cats, args = x.name, x.cat, x.args
    joined: dict = {}                     # each distinct call stack joined once
    out: list[tuple] = []
    append = out.append
    for r, p in zip(t.rows, t.parent):
        up = out[p] if p >= 0 else _ROOT
        name = names[r]
        marker = markers.get(name, markers)
        if marker is markers:
            m = STEP_MARKER.match(name or "")
            marker = markers[name] = int(m.group(1)) if m else None
        if marker is not None:
            append(up if up[4] is not None else (*up[:4], marker, up[5]))
        elif cats[r] == "cpu_op":
            a = args[r]
            own = None
            if a is not None:
                text = a.a0               # text_arg(a, "Call stack"), inlined: asked per span
                if text and type(text) is str:
                    own = joined.get(text, joined)
                    if own is joined:
                        own = joined[text] = join_stack(text)
            if name or not up[3]:
                op = name or None
                # text_arg(a, "Input Dims") with its common answers inlined: asked per span
                dims = None if a is None else a.a1
                if dims is not None and type(dims) is not str:
                    dims = text_arg(a, "Input Dims")
            else:
                op, dims = up[1], up[2]
            append((up[0] if own is None else own, op, dims, True, up[4], up[5]))
        elif cats[r] == "python_function" and name:
            append((*up[:5], (name, up[5])))
        else:
            append(up)
    return out


def host_threads(x: Columns) -> dict:
    """(pid, tid) -> HostThread of its usable cpu_op / python_function events."""
    if x.bad.count(None) == len(x.bad):          # the common trace: every event usable
        rows = list(compress(range(len(x.cat)), map(_HOST.__contains__, x.cat)))
    else:
        rows = [r for r, (cat, why) in enumerate(zip(x.cat, x.bad))
                if why is None and cat in _HOST]
    # a span's end is start + round(dur_us * 1000), as Event.end; a column at a time
    starts = list(map(x.start.__getitem__, rows))
    ends = map(add, starts, map(round, map(mul, map(x.dur_us.__getitem__, rows), repeat(1000))))
    keyed = list(zip(starts, map(neg, ends), rows))
    pids, tids = list(map(x.pid.__getitem__, rows)), list(map(x.tid.__getitem__, rows))
    by: dict = {}
    if rows and len(set(pids)) == 1 and len(set(tids)) == 1:
        by[(pids[0], tids[0])] = keyed          # the common trace: one host thread
    else:
        for key, item in zip(zip(pids, tids), keyed):
            by.setdefault(key, []).append(item)
    markers: dict = {}
    return {k: HostThread(v, x, markers) for k, v in by.items()}


def _launch(t: HostThread, x: Columns, k: int) -> tuple:
    """(stack, launch op, its input dims, step) inside span `k` (and its ancestors): the
    innermost enclosing cpu_op names the launch, the nearest `Call stack` gives the source
    (else the python_function frames), the outermost enclosing `ProfilerStep#N` the step."""
    frames: list[str] = []
    stack = op = dims = step = None
    while k >= 0:
        r = t.rows[k]
        k = t.parent[k]
        name, cat = x.name[r], x.cat[r]
        marker = STEP_MARKER.match(name or "")
        if marker:
            step = int(marker.group(1))
        elif cat == "cpu_op":
            if op is None:
                op = name
                dims = join_stack(x.text(r, "Input Dims"))
            if stack is None and x.text(r, "Call stack"):
                stack = join_stack(x.text(r, "Call stack"))
        elif cat == "python_function" and name:
            frames.append(name)
    if stack is None and frames:
        stack = ";".join(frames)
    return stack, op, dims, step
