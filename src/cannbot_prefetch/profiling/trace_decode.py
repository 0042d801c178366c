"""A Chrome trace's events as small typed records, decoded by msgspec where it can, else
streamed by json_stream.py (the stdlib decoder); both give the same `Rec`s.

msgspec decodes straight into slotted records holding only what trace_events.py reads (the
event keys below and the args it keeps), skipping the rest in C: load_trace 1.03-1.14 s ->
0.61-0.77 s on the 120-step generated Llama trace (75 MB; /tmp A/B in issue 12's note). An
Ascend event list is read ~1 MB at a time and each piece decoded in place in one buffer, so
memory holds one piece's records (peak as the stdlib path's). A torch trace (an object with
`traceEvents`) is decoded whole. Values keep the stdlib reader's spelling (float literals as
text, `float_hook=str`, like `parse_float=str`), so every ts digit reaches the ns conversion.
What msgspec refuses (a BOM, NaN, invalid UTF-8, a non-object event or args, nesting deeper
than it recurses) and what it never sees (gzip, a file over the size cap) goes to the streaming
reader, from the event it stopped at; its messages say what is wrong."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Iterator

import msgspec

from .json_stream import TraceStream

# The args the readers keep: text (torch's shape/type lists spelled as text, stored once) and
# scalar ids; `name` is what an "M" (metadata) event names.
TEXT_ARGS = ("Call stack", "Input Dims", "Input type", "Task Type")
ID_ARGS = ("External id", "stream", "Physic Stream Id", "Stream Id", "Task Id", "Model Id",
           "correlation")
_KEYS = (*TEXT_ARGS, *ID_ARGS, "name")
_ATTRS = tuple(f"a{k}" for k in range(len(_KEYS)))
SLOT = dict(zip(_KEYS, _ATTRS))     # an arg's key as written -> its attribute on Args

# One slot per kept arg, named as written (`Call stack`); other args are skipped unread.
# Records hold decoded JSON values only (no reference can lead back to a record), so they are
# left untracked by the cyclic collector (gc=False): 10^5 of them per trace.
Args = msgspec.defstruct("Args", [(a, Any, msgspec.field(default=None, name=k))
                                  for a, k in zip(_ATTRS, _KEYS)], gc=False)


def arg_name(args) -> Any:
    """An "M" event's `args.name`."""
    return None if args is None else getattr(args, _ATTRS[-1])


class Rec(msgspec.Struct, gc=False):
    """One event: the keys a reader looks at, each as written (any JSON type)."""
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: Args | None = None      # type: ignore[valid-type]


class _Doc(msgspec.Struct):
    traceEvents: list[Rec]    # noqa: N815 (the key as torch writes it)


_LIST = msgspec.json.Decoder(list[Rec], float_hook=str)
_OBJECT = msgspec.json.Decoder(_Doc, float_hook=str)


def record_pieces(path: Path, max_bytes: int) -> tuple[str, Iterator[list[Rec | None]]]:
    """(top, pieces): top is "list" (Ascend) or "object" (torch); the records come in
    consecutive lists (a decoded piece each), so a reader works on a piece's records a field
    at a time. A record is None where the list holds something that is not an event object
    (it keeps its index)."""
    head = _head(path, max_bytes)
    if head == b"[":
        return "list", _list_pieces(path, max_bytes)
    if head == b"{":
        try:
            return "object", iter([_OBJECT.decode(path.read_bytes()).traceEvents])
        except (*_REFUSED, OSError):
            pass
    top, recs = _streamed(path, max_bytes)
    return top, _batched(recs)


_BATCH = 1 << 14    # streamed records handed on per list


def _batched(recs: Iterator[Rec | None]) -> Iterator[list[Rec | None]]:
    while batch := list(itertools.islice(recs, _BATCH)):
        yield batch


# RecursionError: nesting deeper than msgspec recurses (the streaming reader reports it)
_REFUSED = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)
_CHUNK = 1 << 20    # per read; 4 MiB pieces measured +20 MB peak on a 75 MB trace, no faster
# Between two events of the list. Found inside a string or a nested value, the piece before it
# has an open quote or bracket and does not decode: a piece that decodes ends on an event.
_SEP = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")


def _head(path: Path, max_bytes: int) -> bytes:
    """The first byte after blanks of a plain file within the size cap; b"" otherwise (gzip,
    too big, unreadable: the streaming reader says which)."""
    if path.name.lower().endswith(".gz"):
        return b""
    try:
        if path.stat().st_size > max_bytes:
            return b""
        with open(path, "rb") as fh:
            return fh.read(64).lstrip(b" \t\r\n")[:1]
    except OSError:
        return b""


def _list_pieces(path: Path, max_bytes: int) -> Iterator[list[Rec | None]]:
    """An Ascend event list, read and decoded ~1 MB at a time, each piece cut after the last
    whole event in it: memory holds one piece and its records, not the trace. On a piece
    msgspec refuses, the streaming reader takes over at the same event."""
    done = read = 0
    with open(path, "rb") as fh:
        head = fh.read(_CHUNK)
        read = len(head)
        buf = bytearray(head[head.index(b"["):])      # "[" and what follows it
        while True:
            block = fh.read(_CHUNK)
            read += len(block)
            if block:
                buf += block
                cut = _last_sep(buf)
                if cut is None:
                    continue                  # one event longer than the buffer: read on
                # the piece is "[" ... "}" with a "]" written over the byte after it (a blank
                # or the comma), decoded in place; the next starts with "[" at the next "{"
                start, end = cut
                buf[start + 1] = 0x5D
                piece = memoryview(buf)[:start + 2]
                rest = bytearray(b"[")
                rest += memoryview(buf)[end - 1:]
            else:
                piece, rest = buf, None        # the rest holds the closing bracket
            try:
                if read > max_bytes:          # the file grew past the cap while read
                    raise msgspec.DecodeError
                recs = _LIST.decode(piece)
            except _REFUSED:
                break
            finally:
                if isinstance(piece, memoryview):
                    piece.release()
            buf = rest
            done += len(recs)
            yield recs
            if not block:
                return
    yield from _batched(itertools.islice(_streamed(path, max_bytes)[1], done, None))


def _last_sep(buf: bytes) -> tuple[int, int] | None:
    """(start, end) of the last separator in buf (looked for in its tail first)."""
    for lo in (max(0, len(buf) - (1 << 16)), 0):
        last = None
        for last in _SEP.finditer(buf, lo):
            pass
        if last is not None:
            return last.start(), last.end()
        if lo == 0:
            return None
    return None


def _streamed(path: Path, max_bytes: int) -> tuple[str, Iterator[Rec | None]]:
    stream = TraceStream(path, max_bytes)
    events = stream.events()
    first = next(events, _END)          # reads up to the first event: `top` is known then
    if first is _END:
        return stream.top or "list", iter(())

    def rest() -> Iterator[Rec | None]:
        yield from_dict(first)
        for e in events:
            yield from_dict(e)
    return stream.top or "list", rest()


_END = object()


def from_dict(e: object) -> Rec | None:
    """A streamed event (the stdlib's dict) as the record the whole-file decode gives."""
    if type(e) is not dict:
        return None
    raw = e.get("args")
    args = None
    if type(raw) is dict:
        args = Args(**{attr: raw[key] for key, attr in zip(_KEYS, _ATTRS) if key in raw})
    return Rec(e.get("ph"), e.get("cat"), e.get("name"), e.get("pid"), e.get("tid"),
               e.get("ts"), e.get("dur"), e.get("id"), args)
