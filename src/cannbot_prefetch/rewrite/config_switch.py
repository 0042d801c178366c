"""The prefetch switch added to a YAML runner config (`switch.config_file`) as marked lines,
keeping every other byte (markers.strip_yaml_markers takes them out again)."""

from __future__ import annotations

from ..errors import InputError
from ..plan import grammar
from ..pysource import source_lines
from .markers import MARKER


def _insert_lines(text: str, at: int, new: list[str], nl: str) -> str:
    """`new` (lines without endings) put before line index `at` (len = at the end); a text
    without a final newline still ends without one (strip_yaml_markers undoes exactly this)."""
    lines = source_lines(text)
    out = lines[:at]
    if out and not out[-1].endswith(("\n", "\r")):
        out[-1] += nl
    out += [ln + nl for ln in new]
    out += lines[at:]
    if lines and at == len(lines) and not lines[-1].endswith(("\n", "\r")):
        out[-1] = out[-1][: -len(nl)]
    return "".join(out)


def add_yaml_key(text: str, config_path: str) -> str:
    """Add `<config_path>: false` to a YAML text, as marked lines, keeping everything else.
    `config_path` passed the plan grammar (identifiers and dots: one line, nothing to quote)."""
    if not grammar.is_dotted(config_path):
        raise InputError(f"switch.config_path {config_path!r} is not a dotted name")
    parts = config_path.split(".")
    key, parents = parts[-1], parts[:-1]
    lines = source_lines(text)
    nl = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    mark = f"  {MARKER}switch"
    if parents:
        parent = parents[-1]
        for i, ln in enumerate(lines):
            stripped = ln.lstrip(" ")
            if stripped.startswith(parent + ":") and not stripped[len(parent) + 1:].strip():
                indent = len(ln) - len(stripped)
                child = " " * (indent + 2)
                j = i + 1
                while j < len(lines) and (not lines[j].strip() or
                                          len(lines[j]) - len(lines[j].lstrip(" ")) > indent):
                    body = lines[j].lstrip(" ")
                    if body.startswith(key + ":"):
                        return text  # already there
                    if lines[j].strip():
                        child = lines[j][: len(lines[j]) - len(body)]
                    j += 1
                return _insert_lines(text, i + 1, [f"{child}{key}: false{mark}"], nl)
        block, indent = [], ""
        for p in parents:
            block.append(f"{indent}{p}:{mark}")
            indent += "  "
        block.append(f"{indent}{key}: false{mark}")
        return _insert_lines(text, len(lines), block, nl)
    for ln in lines:
        if ln.startswith(key + ":"):
            return text
    return _insert_lines(text, len(lines), [f"{key}: false{mark}"], nl)
