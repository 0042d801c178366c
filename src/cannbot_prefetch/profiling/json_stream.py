"""A Chrome trace's event list, one event at a time, in bounded memory.

`json.load` of a trace holds every event as a dict at once (about 3-4x the file in memory) and
recurses on nesting; a trace is a flat list of small objects, so each event is decoded on its
own (the same C decoder, `raw_decode`) from a sliding buffer and dropped once the caller has
taken what it needs. Both shapes are read: a bare list (Ascend `trace_view.json`) and an
object whose `traceEvents` key holds the list (PyTorch; other keys are decoded and dropped).
The bytes read (after gzip) are capped, a UTF-8 BOM and form feeds between values are
tolerated, and nesting beyond the decoder's reach is reported, not raised.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Iterator

from ..errors import InputError

_CHUNK = 1 << 20                 # bytes per read
_MAX_VALUE = 64 << 20            # one event (or other top-level value) larger than this is damage
_BLANKS = re.compile("[ \t\n\r\f\ufeff]*")   # JSON whitespace, plus a BOM and form feeds


class TraceStream:
    """`events()` yields each element of the event list; `top` says which shape held it."""

    def __init__(self, path: Path, max_bytes: int):
        self.path = path
        self.max_bytes = max_bytes
        self.top: str | None = None          # "list" | "object"
        self._fh = None
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._json = json.JSONDecoder(parse_float=str, parse_constant=str)
        self._buf = ""
        self._pos = 0
        self._read = 0
        self._base = 0                       # characters dropped from the buffer's front
        self._eof = False

    # ------------------------------------------------------------ public

    def events(self) -> Iterator[object]:
        opener = gzip.open if self.path.name.lower().endswith(".gz") else open
        try:
            with opener(self.path, "rb") as fh:
                self._fh = fh
                yield from self._document()
        except (OSError, EOFError, zlib.error) as exc:
            raise self._error(f"cannot read ({getattr(exc, 'strerror', None) or exc})") from None

    # ------------------------------------------------------------ structure

    def _document(self) -> Iterator[object]:
        c = self._peek()
        if c == "[":
            self.top = "list"
            self._pos += 1
            yield from self._array()
        elif c == "{":
            self.top = "object"
            self._pos += 1
            yield from self._object()
        elif c is None:
            raise self._error("empty file")
        else:
            raise self._error("JSON is not a Chrome trace (no event list or traceEvents)")
        if self._peek() is not None:
            raise self._error("not valid JSON (extra data after the trace)")

    def _object(self) -> Iterator[object]:
        """Top-level keys: `traceEvents` is streamed, every other value decoded and dropped."""
        found = False
        first = True
        while True:
            c = self._peek()
            if c is None:
                raise self._error("truncated (the trace object is not closed)")
            if c == "}":
                self._pos += 1
                break
            if not first:
                self._expect(",")
                c = self._peek()
            first = False
            if c != '"':
                raise self._error("not valid JSON (expected a key)")
            key = self._value()
            self._expect(":")
            if key == "traceEvents" and self._peek() == "[":
                self._pos += 1
                found = True
                yield from self._array()
            else:
                self._value()
        if not found:
            raise self._error("JSON is not a Chrome trace (no event list or traceEvents)")

    def _array(self) -> Iterator[object]:
        need_comma = False
        decode = self._json.raw_decode
        refilled = False
        while True:
            buf, pos = self._buf, self._pos
            if not need_comma and buf.startswith("{", pos):
                batch = self._batch(buf, pos)
                if batch is not None:           # the common case: many events per call
                    refilled = False
                    yield from batch
                    continue
                if not refilled and not self._eof:
                    # most likely the buffer ends inside the next event: read on rather than
                    # fail a decode (whose error counts lines over the whole buffer)
                    self._fill()
                    refilled = True
                    continue
                try:                            # one event (a large one, or damage)
                    obj, end = decode(buf, pos)
                except (ValueError, RecursionError):
                    pass                        # the careful path below decides
                else:
                    if end < len(buf):
                        if buf.startswith(",", end):
                            end += 1
                        else:
                            need_comma = True
                        self._pos = end
                        refilled = False
                        yield obj
                        continue
            refilled = False
            c = self._peek()
            if c is None:
                raise self._error("truncated (the event list is not closed)")
            if c == "]":
                self._pos += 1
                return
            if need_comma:
                self._expect(",")
                need_comma = False
                continue
            obj = self._value()
            need_comma = True
            yield obj

    def _batch(self, buf: str, pos: int) -> list | None:
        """Every whole event from `pos` to the last `},{` in the buffer, decoded in one call
        (no Python per event); None when there is no such run or it does not decode (a `},{`
        inside a string cuts one open: then the careful path below takes over)."""
        cut = buf.rfind("},", pos)
        while cut > pos:
            nxt = _BLANKS.match(buf, cut + 2).end()
            if nxt < len(buf) and buf[nxt] == "{":
                break
            if nxt < len(buf):
                cut = buf.rfind("},", pos, cut)
                continue
            return None                     # the buffer ends right after the comma
        if cut <= pos:
            return None
        try:
            events = self._json.decode("[" + buf[pos:cut + 1] + "]")
        except (ValueError, RecursionError):
            return None
        self._pos = nxt
        return events

    # ------------------------------------------------------------ tokens

    def _value(self) -> object:
        """Decode one value at the cursor, reading more when it runs past the buffer."""
        if self._peek() is None:
            raise self._error("truncated (the event list is not closed)")
        while True:
            try:
                obj, end = self._json.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if self._eof:
                    raise self._error(f"not valid JSON ({exc.msg} near "
                                      f"character {self._offset(exc.pos):,})") from None
                if len(self._buf) - self._pos > _MAX_VALUE:
                    raise self._error(f"an event larger than {_MAX_VALUE >> 20} MiB, or not "
                                      f"valid JSON near character {self._offset(exc.pos):,}: "
                                      "not a profiler trace") from None
                self._fill(len(self._buf) - self._pos)   # double what the value has so far
                continue
            except RecursionError:
                raise self._error("not valid JSON (nested too deeply)") from None
            if end == len(self._buf) and not self._eof:  # a number may go on in the next chunk
                self._fill()
                continue
            self._pos = end
            return obj

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            if self._peek() is None:
                raise self._error("truncated (the event list is not closed)")
            raise self._error(f"not valid JSON (expected {char!r} near character "
                              f"{self._offset(self._pos):,})")
        self._pos += 1

    def _peek(self) -> str | None:
        """Next non-blank character (not consumed); None at the end of the file."""
        while True:
            buf = self._buf
            pos = self._pos = _BLANKS.match(buf, self._pos).end()
            if pos < len(buf):
                return buf[pos]
            if self._eof:
                return None
            self._fill()

    def _fill(self, at_least: int = 0) -> None:
        data = self._fh.read(max(_CHUNK, at_least))
        self._read += len(data)
        if self._read > self.max_bytes:
            raise self._error(f"larger than {self.max_bytes / 1e6:,.0f} MB"
                              f"{' decompressed' if self.path.name.lower().endswith('.gz') else ''}"
                              " (profiling.max_trace_mb): export fewer steps")
        text = self._dec.decode(data, final=not data)
        if not data:
            self._eof = True
        self._buf = self._buf[self._pos:] + text
        self._base += self._pos
        self._pos = 0

    def _offset(self, pos: int) -> int:
        return self._base + pos

    def _error(self, message: str) -> InputError:
        return InputError(message, path=str(self.path))
