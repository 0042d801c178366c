"""Line numbers of the model frames, by plain text search of the model source file.

A frame (class, call texts, occurrence) is the `occurrence`-th line of `Class.forward` that
contains the first call text found there; "def forward" is the method's def line. No parser
and nothing from cannbot_prefetch: the line a with_stack profile records is the line of the call.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from .ops import SCRIPT, Frame

# The driver script's lines (a plain greedy loop):
#   41: logits = model(input_ids=ids, past_key_values=cache).logits[:, -1].float()
#   42: ids = torch.argmax(logits, dim=-1, keepdim=True)
SCRIPT_LINES = {"model(": 41, "torch.argmax(": 42}


def installed_source(model_type: str) -> Path:
    """transformers' own modeling file for a model_type, found without importing transformers."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("transformers is not installed: pass model_src")
    path = Path(spec.origin).parent / "models" / model_type / f"modeling_{model_type}.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: pass model_src")
    return path


def forwards(text: str) -> dict[str, tuple[int, list[tuple[int, str]]]]:
    """Per top-level class: (line of `def forward`, [(line, text)] of its body)."""
    out: dict[str, tuple[int, list[tuple[int, str]]]] = {}
    cls, body = None, None
    for no, line in enumerate(text.splitlines(), 1):
        m = re.match(r"class\s+(\w+)", line)
        if m:
            cls, body = m.group(1), None
            continue
        if line and not line[0].isspace() and not line.startswith((")", "#")):
            cls, body = None, None
            continue
        if cls is None:
            continue
        if re.match(r"    def forward\b", line):
            if cls not in out:
                out[cls] = (no, [])
                body = out[cls][1]
            continue
        if re.match(r"    (async\s+)?def \w|    @", line):
            body = None
            continue
        if body is not None:
            body.append((no, line))
    return out


class Lines:
    """Frame -> line in one model source file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._text = self.path.read_text(encoding="utf-8").splitlines()
        self._fw = forwards("\n".join(self._text))

    def top_level(self, line: int) -> bool:
        """The line is a statement directly in a method body (not inside a loop, with, if)."""
        text = self._text[line - 1]
        return len(text) - len(text.lstrip(" ")) == 8

    def line(self, frame: Frame) -> int:
        cls, calls, occ = frame
        if cls == SCRIPT:
            return SCRIPT_LINES.get(calls[0], 1)
        if cls not in self._fw:
            raise LookupError(f"{self.path.name}: no class {cls} with a forward")
        def_line, body = self._fw[cls]
        if calls[0] == "def forward":
            return def_line
        for call in calls:
            hits = [no for no, text in body if call in text]
            if len(hits) >= occ:
                return hits[occ - 1]
        raise LookupError(f"{self.path.name}: {cls}.forward has no line with {' or '.join(calls)!r} "
                          f"(occurrence {occ})")
